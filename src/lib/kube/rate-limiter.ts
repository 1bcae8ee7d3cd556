import {setTimeout as sleep} from 'node:timers/promises'

export interface TokenBucketState {
  /** Tokens available at `at` (may be negative: reservations already handed out). */
  readonly tokens: number
  readonly at: number
}

/**
 * Reserves one token at time `now` (ms). Returns the new state and how long the caller must wait before
 * using its token. Pure, so the limiter's arithmetic is tested without timers.
 */
export function reserveToken(state: TokenBucketState, now: number, qps: number, burst: number): {state: TokenBucketState; waitMs: number} {
  // A clock that went backwards refills nothing rather than draining the bucket.
  const refilled = Math.min(burst, state.tokens + (Math.max(0, now - state.at) * qps) / 1000)
  const tokens = refilled - 1
  const waitMs = tokens >= 0 ? 0 : Math.ceil((-tokens * 1000) / qps)
  return {state: {at: now, tokens}, waitMs}
}

/** Client-side request rate limit (`--qps`, `--burst`), the same model as client-go's token bucket. */
export class RateLimiter {
  #state: TokenBucketState

  constructor(
    readonly qps: number,
    readonly burst: number,
    // Monotonic by default: a wall-clock step must not stall every request.
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(qps > 0) || !Number.isFinite(qps)) throw new RangeError(`Expected qps to be a finite number > 0, got ${qps}`)
    if (!Number.isInteger(burst) || burst < 1) throw new RangeError(`Expected burst to be an integer >= 1, got ${burst}`)
    this.#state = {at: now(), tokens: burst}
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    const now = this.now()
    const {state, waitMs} = reserveToken(this.#state, now, this.qps, this.burst)
    this.#state = {at: Math.max(state.at, this.#state.at), tokens: state.tokens}
    if (waitMs > 0) await sleep(waitMs, undefined, {signal})
  }
}
