import {maxDurationMs, parseDurationMs} from '../duration.js'
import {UsageError} from '../errors.js'
import {findGcKind, gcKindNames, gcKinds, type GcKind} from './kinds.js'
import type {PlanOptions} from './sweep-planner.js'

/** The flags of `gc once` as oclif hands them over, before any checking. */
export interface RawSweepFlags {
  readonly 'allow-empty-nodes': boolean
  readonly burst?: number
  readonly concurrency: number
  readonly 'dry-run': boolean
  readonly 'fail-on-stale': boolean
  readonly force: boolean
  readonly 'keep-unlabelled': boolean
  readonly kinds?: string
  readonly 'list-size': number
  readonly 'max-delete-ratio': number
  readonly qps?: number
  readonly timeout: string
}

export interface SweepOptions extends PlanOptions {
  /** Client-side caps; none by default: the concurrency window follows the server's 429s. */
  readonly burst?: number
  readonly concurrency: number
  readonly dryRun: boolean
  readonly failOnStale: boolean
  readonly kinds: readonly GcKind[]
  readonly listSize: number
  readonly qps?: number
  /** 0: no deadline. */
  readonly timeoutMs: number
}

/** Turns raw flags into checked options; every mistake is one UsageError naming the flag and the fix. */
export function sweepOptionsFrom(flags: RawSweepFlags): SweepOptions {
  const kinds = parseKinds(flags.kinds)
  const ratio = flags['max-delete-ratio']
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new UsageError(`--max-delete-ratio must be a number from 0 to 1, got ${ratio}`)
  }
  integerAtLeast('--list-size', flags['list-size'], 0, 'use 0 to list everything in one request')
  integerAtLeast('--concurrency', flags.concurrency, 1)
  if (flags.burst !== undefined) {
    integerAtLeast('--burst', flags.burst, 1)
    if (flags.qps === undefined) throw new UsageError('--burst only applies with --qps; add --qps or drop --burst')
  }
  if (flags.qps !== undefined && (!Number.isFinite(flags.qps) || flags.qps <= 0)) throw new UsageError(`--qps must be a number > 0, got ${flags.qps}`)
  if (flags['fail-on-stale'] && !flags['dry-run']) {
    throw new UsageError('--fail-on-stale only applies to --dry-run; add --dry-run or drop --fail-on-stale')
  }
  const timeoutMs = parseDurationMs(flags.timeout)
  if (timeoutMs === undefined) throw new UsageError(`--timeout must be a duration such as 30s, 5m or 0 (none), got "${flags.timeout}"`)
  if (timeoutMs > maxDurationMs) throw new UsageError(`--timeout must be at most 596h (24 days), or 0 for none, got "${flags.timeout}"`)
  return {
    allowEmptyNodes: flags['allow-empty-nodes'],
    burst: flags.burst,
    concurrency: flags.concurrency,
    dryRun: flags['dry-run'],
    failOnStale: flags['fail-on-stale'],
    force: flags.force,
    keepUnlabelled: flags['keep-unlabelled'],
    kinds,
    listSize: flags['list-size'],
    maxDeleteRatio: ratio,
    qps: flags.qps,
    timeoutMs,
  }
}

function parseKinds(text: string | undefined): readonly GcKind[] {
  if (text === undefined) return gcKinds
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  if (names.length === 0) throw new UsageError(`--kinds needs at least one of ${gcKindNames.join(', ')}`)
  const chosen: GcKind[] = []
  for (const name of names) {
    const kind = findGcKind(name)
    if (kind === undefined) throw new UsageError(`--kinds: unknown kind "${name}"; choose from ${gcKindNames.join(', ')}`)
    if (!chosen.includes(kind)) chosen.push(kind)
  }
  return chosen
}

function integerAtLeast(flag: string, value: number, min: number, hint?: string): void {
  if (!Number.isInteger(value) || value < min) {
    throw new UsageError(`${flag} must be a whole number >= ${min}, got ${value}${hint ? ` (${hint})` : ''}`)
  }
}
