/**
 * Work per claim, one after the other: kubelet's prepare and unprepare of a claim, the rewrite of its CDI
 * spec and its clean-up never interleave; different claims run side by side. A failure ends only its own
 * work, never the queue.
 */
export class ClaimLocks {
  readonly #tails = new Map<string, Promise<unknown>>()

  /** Runs `work` after whatever runs for the same claim; settles as `work` does. */
  run<T>(uid: string, work: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(uid) ?? Promise.resolve()
    const run = before.then(work)
    const settled = run.catch(() => {})
    this.#tails.set(uid, settled)
    void settled.then(() => {
      if (this.#tails.get(uid) === settled) this.#tails.delete(uid)
    })
    return run
  }

  /** Claims with work running or queued (tests: nothing is kept once it is done). */
  get size(): number {
    return this.#tails.size
  }
}
