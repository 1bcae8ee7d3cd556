import {maxDurationMs, parseDurationMs} from '../duration.js'
import {UsageError} from '../errors.js'
import {observeOptionsFrom, type ObserveOptions, type RawObserveFlags} from '../observe/observe-options.js'
import {sweepOptionsFrom, type RawSweepFlags, type SweepOptions} from './sweep-options.js'

/** The flags of `gc run` as oclif hands them over. */
export interface RawRunFlags extends Omit<RawSweepFlags, 'dry-run' | 'fail-on-stale' | 'timeout'>, RawObserveFlags {
  readonly interval: string
  readonly 'grace-period': string
  readonly 'leader-elect': boolean
  readonly 'leader-elect-namespace'?: string
  readonly 'leader-elect-lease-name': string
  readonly 'leader-elect-lease-duration': string
  readonly 'leader-elect-renew-deadline': string
  readonly 'leader-elect-retry-period': string
}

export interface RunOptions extends SweepOptions, ObserveOptions {
  readonly intervalMs: number
  readonly graceMs: number
  readonly leaderElection?: {namespace?: string; name: string; leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number}
}

function duration(flag: string, text: string, min: 'positive' | 'zero-or-more'): number {
  const ms = parseDurationMs(text)
  if (ms === undefined) throw new UsageError(`--${flag} must be a duration such as 30s, 5m or 1h, got "${text}"`)
  if (min === 'positive' && ms <= 0) throw new UsageError(`--${flag} must be greater than 0, got "${text}"`)
  if (ms > maxDurationMs) throw new UsageError(`--${flag} must be at most 596h (24 days), got "${text}"`)
  return ms
}

/** Checks `gc run`'s flags; each mistake is one UsageError that names the flag and the fix. */
export function runOptionsFrom(flags: RawRunFlags, stdoutIsTty: boolean): RunOptions {
  const sweep = sweepOptionsFrom({...flags, 'dry-run': false, 'fail-on-stale': false, timeout: '0'})
  const intervalMs = duration('interval', flags.interval, 'positive')
  const graceMs = duration('grace-period', flags['grace-period'], 'zero-or-more')
  const observe = observeOptionsFrom(flags, stdoutIsTty)
  let leaderElection: RunOptions['leaderElection']
  if (flags['leader-elect']) {
    const leaseDurationMs = duration('leader-elect-lease-duration', flags['leader-elect-lease-duration'], 'positive')
    const renewDeadlineMs = duration('leader-elect-renew-deadline', flags['leader-elect-renew-deadline'], 'positive')
    const retryPeriodMs = duration('leader-elect-retry-period', flags['leader-elect-retry-period'], 'positive')
    if (!(leaseDurationMs > renewDeadlineMs)) throw new UsageError('--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline')
    if (!(renewDeadlineMs > retryPeriodMs)) throw new UsageError('--leader-elect-renew-deadline must be longer than --leader-elect-retry-period')
    leaderElection = {leaseDurationMs, name: flags['leader-elect-lease-name'], namespace: flags['leader-elect-namespace'], renewDeadlineMs, retryPeriodMs}
  }
  return {...sweep, ...observe, graceMs, intervalMs, leaderElection}
}
