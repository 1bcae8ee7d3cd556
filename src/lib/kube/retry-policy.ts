import {backoffMs} from '../backoff.js'
import type {StatusClass} from './api-error.js'

export interface RetryPolicy {
  /** Attempts after the first one. */
  readonly maxRetries: number
  readonly baseDelayMs: number
  readonly maxDelayMs: number
}

export const defaultRetryPolicy: RetryPolicy = {baseDelayMs: 200, maxDelayMs: 10_000, maxRetries: 5}

/** What went wrong with one attempt, as far as retrying is concerned. */
export type AttemptFailure = {kind: 'network'} | {kind: 'status'; retryAfterSeconds?: number; statusClass: StatusClass}

/**
 * Delay before the next attempt, or undefined when the failure is final. Pure: `random` is passed in.
 * The shared back-off (backoff.ts) with jitter between half the doubling value and all of it; a server's
 * Retry-After wins when it is longer.
 */
export function retryDelayMs(policy: RetryPolicy, attempt: number, failure: AttemptFailure, random: number): number | undefined {
  if (attempt >= policy.maxRetries) return undefined
  if (failure.kind === 'status' && failure.statusClass !== 'TooManyRequests' && failure.statusClass !== 'Unavailable') {
    return undefined
  }
  // Attempt 0 is the first retry: one failure so far.
  const jittered = backoffMs({baseMs: policy.baseDelayMs, jitter: [0.5, 1], maxMs: policy.maxDelayMs}, attempt + 1, random)
  const serverMs = failure.kind === 'status' && failure.retryAfterSeconds !== undefined ? failure.retryAfterSeconds * 1000 : 0
  return Math.min(Math.max(jittered, serverMs), Math.max(policy.maxDelayMs, serverMs))
}
