import {backoffMs, type BackoffPolicy} from './backoff.js'

/**
 * How a supervised source is retried and when it is given up on. A run of failures is ended only by the
 * source staying up for `stableMs`: one that comes back for a moment and fails again (a flapping socket)
 * keeps counting towards `giveUpAfterMs`.
 */
export interface SupervisionPolicy {
  readonly backoff: BackoffPolicy
  /** A run of failures this long (from its first failure) makes the source fatal; undefined: never. */
  readonly giveUpAfterMs?: number
  /** Up this long, a source's next failure starts a new run. */
  readonly stableMs: number
}

/** The failures since the source last stayed up for `stableMs`. */
export interface FailureRun {
  /** When the first failure of the run happened (ms). */
  readonly since: number
  readonly failures: number
  readonly lastError: string
}

/** One field instead of loose flags: where a supervised source is. */
export type SourceState =
  | {readonly phase: 'starting'}
  | {readonly phase: 'up'; readonly since: number; readonly run?: FailureRun}
  | ({readonly phase: 'down'; readonly downSince: number} & FailureRun)
  | ({readonly phase: 'given-up'; readonly downSince: number} & FailureRun)
  | {readonly phase: 'stopped'}

export const startingSource: SourceState = {phase: 'starting'}

/** The source works (again). A source given up on or stopped stays so. */
export function sourceUp(state: SourceState, now: number): SourceState {
  if (state.phase === 'given-up' || state.phase === 'stopped' || state.phase === 'up') return state
  if (state.phase === 'starting') return {phase: 'up', since: now}
  const {failures, lastError, since} = state
  return {phase: 'up', run: {failures, lastError, since}, since: now}
}

/** The source failed: down (retried after retryDelayMs) or, once its run of failures is too long, given up on. */
export function sourceFailed(state: SourceState, error: string, now: number, policy: SupervisionPolicy): SourceState {
  if (state.phase === 'given-up' || state.phase === 'stopped') return state
  let run: FailureRun
  if (state.phase === 'down') run = {failures: state.failures + 1, lastError: error, since: state.since}
  else if (state.phase === 'up' && state.run !== undefined && now - state.since < policy.stableMs) {
    run = {failures: state.run.failures + 1, lastError: error, since: state.run.since}
  } else run = {failures: 1, lastError: error, since: now}
  const downSince = state.phase === 'down' ? state.downSince : now
  const giveUp = policy.giveUpAfterMs !== undefined && now - run.since >= policy.giveUpAfterMs
  return {...run, downSince, phase: giveUp ? 'given-up' : 'down'}
}

/** How long to wait before restarting a source that is down: the shared back-off over its run's failures. */
export function retryDelayMs(state: SourceState, policy: SupervisionPolicy): number | undefined {
  return state.phase === 'down' ? backoffMs(policy.backoff, state.failures) : undefined
}

/** One clause for /readyz and the logs: which source, since when, the last error. Undefined while it is up. */
export function describeSource(name: string, state: SourceState, now: number): string | undefined {
  const seconds = (from: number): string => `${Math.max(0, Math.round((now - from) / 1000))} s`
  switch (state.phase) {
    case 'up':
      return undefined
    case 'starting':
      return `${name}: starting`
    case 'stopped':
      return `${name}: stopped`
    case 'down':
      return `${name}: down for ${seconds(state.downSince)} (${state.failures} ${state.failures === 1 ? 'failure' : 'failures'} in ${seconds(state.since)}): ${state.lastError}`
    case 'given-up':
      return `${name}: given up after ${state.failures} failures in ${seconds(state.since)}: ${state.lastError}`
  }
}
