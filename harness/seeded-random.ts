/**
 * A small seeded random source (mulberry32): a randomised test prints its seed, and the same seed gives the
 * same sequence of choices, so that a failure can be run again.
 */
export class SeededRandom {
  #state: number

  constructor(readonly seed: number) {
    this.#state = seed >>> 0
  }

  /** In [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d_2b_79_f5) >>> 0
    let t = this.#state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }

  /** A whole number in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('nothing to pick from')
    return items[Math.floor(this.next() * items.length)]!
  }
}

/**
 * The seed of a randomised run: `variable` from the environment when set (to repeat a run), else a fresh one.
 * A value that is not a whole number is a mistake worth stopping for.
 */
export function seedFrom(variable: string): number {
  const given = process.env[variable]
  if (given === undefined || given === '') return Math.floor(Math.random() * 2 ** 31)
  const seed = Number(given)
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`${variable}=${given} is not a seed; give a whole number such as the one a failed run printed`)
  return seed
}
