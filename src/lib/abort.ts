/** Resolves when the signal aborts (at once if it already has). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), {once: true}))
}

/**
 * Callbacks run when a signal aborts, behind one listener per signal however many are added: a sweep's
 * signal is shared by every request and every request waiting for a slot, and one listener each would trip
 * the MaxListeners warning and keep a closure per request on the signal.
 */
export class AbortFanout {
  readonly #callbacks = new WeakMap<AbortSignal, Set<() => void>>()

  /** Runs `callback` once `signal` aborts; the returned function takes it back. */
  add(signal: AbortSignal, callback: () => void): () => void {
    let callbacks = this.#callbacks.get(signal)
    if (callbacks === undefined) {
      const set = new Set<() => void>()
      callbacks = set
      this.#callbacks.set(signal, set)
      signal.addEventListener(
        'abort',
        () => {
          for (const run of [...set]) run()
        },
        {once: true},
      )
    }
    callbacks.add(callback)
    return () => callbacks.delete(callback)
  }
}
