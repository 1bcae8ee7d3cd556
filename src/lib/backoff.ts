/** How long to wait between attempts at something that keeps failing: base doubling, up to max. */
export interface BackoffPolicy {
  readonly baseMs: number
  readonly maxMs: number
}

/** The wait after the given number of failures in a row (1 for the first): base, 2 × base, 4 × base … max. */
export function backoffMs(policy: BackoffPolicy, failures: number): number {
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, failures - 1))
}

/** The failures in a row of one retried thing; a success starts over. */
export class Backoff {
  #failures = 0

  constructor(readonly policy: BackoffPolicy) {}

  get failures(): number {
    return this.#failures
  }

  /** Counts a failure and returns the wait before the next attempt. */
  next(): number {
    return backoffMs(this.policy, ++this.#failures)
  }

  reset(): void {
    this.#failures = 0
  }
}
