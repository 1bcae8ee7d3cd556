import type {Timers} from '../../src/lib/event-batcher.js'

/** A clock that moves only when told: timers fire in time order as it passes them. */
export class VirtualTimers implements Timers {
  #now = 0
  #next = 0
  readonly #timers = new Map<number, {at: number; fn: () => void}>()

  now(): number {
    return this.#now
  }

  set(fn: () => void, ms: number): unknown {
    const id = ++this.#next
    this.#timers.set(id, {at: this.#now + ms, fn})
    return id
  }

  clear(handle: unknown): void {
    this.#timers.delete(handle as number)
  }

  get pending(): number {
    return this.#timers.size
  }

  /** Moves to `to`, firing each due timer at its own time and letting its promises settle. */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      const due = [...this.#timers].filter(([, t]) => t.at <= to).sort(([, a], [, b]) => a.at - b.at)[0]
      if (due === undefined) break
      this.#timers.delete(due[0])
      this.#now = due[1].at
      due[1].fn()
      await settle()
    }
    this.#now = to
    await settle()
  }
}

export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))
