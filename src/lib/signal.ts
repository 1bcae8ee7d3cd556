/**
 * A typed event between two parts that must not hold each other: the one who builds both creates the signal,
 * one side emits, the other listens. Listeners run synchronously, in the order they were added.
 */
export class Signal<E = void> {
  readonly #listeners = new Set<(event: E) => void>()

  emit(event: E): void {
    for (const listener of [...this.#listeners]) listener(event)
  }

  /** Returns the call that removes the listener. */
  listen(listener: (event: E) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }
}
