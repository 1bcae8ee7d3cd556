import {ExitCode, type ExitCodeValue} from '../errors.js'
import type {StaleReason} from './sweep-planner.js'

/** What happened to one stale object. */
export type ObjectResult =
  | 'absent' // already gone when we deleted it
  | 'changed' // changed since it was judged, and judged again no longer stale: kept
  | 'deleted'
  | 'failed'
  | 'kept' // refused for safety: not deleted
  | 'node-exists' // its Node exists when checked again right before the deletes (registered again): kept
  | 'replaced' // the name now belongs to a new object (other UID): kept
  | 'would-delete' // --dry-run

export interface StaleObjectReport {
  readonly kind: string
  readonly namespace?: string
  readonly name: string
  readonly uid: string
  readonly node?: string
  readonly reason: StaleReason
  readonly action: 'delete' | 'none'
  readonly result: ObjectResult
  readonly error?: string
}

export interface KindSummary {
  readonly kind: string
  scanned: number
  stale: number
  deleted: number
  /** Judged stale, then kept at deletion time: the object changed or was re-created, or its Node exists again. */
  changed: number
  failed: number
  /** Why the kind was not swept (its CRD is not installed). */
  skipped?: string
}

/** The result of `gc once`, printed by --json: its shape is API. */
export interface SweepReport {
  readonly dryRun: boolean
  readonly nodes: number
  readonly kinds: KindSummary[]
  readonly objects: StaleObjectReport[]
  /** Set when the sweep was refused for safety: nothing was deleted. */
  readonly refused?: string
  readonly durationMs: number
  readonly apiRequests: number
  /** 429 answers (API Priority and Fairness) during the sweep; each was retried after its Retry-After. */
  readonly apiThrottled: number
  /** The concurrency window: where it ended, and the lowest and highest it reached. */
  readonly concurrency: {readonly final: number; readonly lowest: number; readonly highest: number}
}

export function countStale(report: SweepReport): number {
  return report.kinds.reduce((n, k) => n + k.stale, 0)
}

export function countFailed(report: SweepReport): number {
  return report.kinds.reduce((n, k) => n + k.failed, 0)
}

/** 1 when refused or some deletions failed; 3 for stale objects under --dry-run --fail-on-stale; else 0. */
export function exitCodeFor(report: SweepReport, options: {failOnStale: boolean}): ExitCodeValue {
  if (report.refused !== undefined || countFailed(report) > 0) return ExitCode.failed
  if (report.dryRun && options.failOnStale && countStale(report) > 0) return ExitCode.staleFound
  return ExitCode.ok
}
