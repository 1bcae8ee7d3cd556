/** How long to wait between attempts at something that keeps failing: base doubling, up to max. */
export interface BackoffPolicy {
  readonly baseMs: number
  readonly maxMs: number
  /**
   * Spreads the waits of many clients that failed at the same moment (every agent when the API server
   * restarts): the wait is drawn between these fractions of the doubling value by the random number passed
   * in, e.g. [0, 1] full jitter, [0.5, 1] at least half, [0.8, 1.2] ±20 %. Without it, or without a random
   * number, the wait is the doubling value itself.
   */
  readonly jitter?: readonly [low: number, high: number]
}

/**
 * The one back-off formula: the wait after the given number of failures in a row (1 for the first): base,
 * 2 × base, 4 × base … max, then drawn within the policy's jitter by `random` (in [0, 1]; passed in, so the
 * formula stays pure). Whole milliseconds.
 */
export function backoffMs(policy: BackoffPolicy, failures: number, random?: number): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, failures - 1))
  if (policy.jitter === undefined || random === undefined) return ceiling
  const [low, high] = policy.jitter
  return Math.round(ceiling * (low + (high - low) * random))
}

/** The failures in a row of one retried thing; a success starts over. */
export class Backoff {
  #failures = 0

  constructor(readonly policy: BackoffPolicy) {}

  get failures(): number {
    return this.#failures
  }

  /** Counts a failure and returns the wait before the next attempt (`random`: see backoffMs). */
  next(random?: number): number {
    return backoffMs(this.policy, ++this.#failures, random)
  }

  reset(): void {
    this.#failures = 0
  }
}
