/**
 * Work per key, one after the other; different keys side by side. Work for a key with nothing running starts
 * at once, in the caller's turn (the agent's device lane grants synchronously up to its first wait). A failure
 * ends only its own work, never the queue; nothing is kept for a key once its work is done.
 */
export class KeyedQueue {
  readonly #tails = new Map<string, Promise<unknown>>()

  /** Runs `work` after whatever runs for the same key; settles as `work` does. */
  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(key)
    const run = before === undefined ? work() : before.then(work)
    const settled = run.catch(() => {})
    this.#tails.set(key, settled)
    void settled.then(() => {
      if (this.#tails.get(key) === settled) this.#tails.delete(key)
    })
    return run
  }

  /** Keys with work running or queued. */
  get size(): number {
    return this.#tails.size
  }
}
