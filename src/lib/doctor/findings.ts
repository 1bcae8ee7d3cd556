/** What `nfdctl doctor` says: one finding per check, each naming the feature it bears on. Pure. */
import {ExitCode} from '../errors.js'

/** The features nfdctl offers, as an operator names them. */
export type Feature = 'admission policies' | 'agent' | 'device plugins' | 'device taints' | 'DRA' | 'DRA by limit' | 'gc'

/** ok: works here; warn: missing or degraded, but no class of the cluster needs it; fail: a class needs it and it does not work. */
export type FindingStatus = 'fail' | 'ok' | 'warn'

export interface Finding {
  readonly feature: Feature
  /** What was checked, e.g. "API server version". */
  readonly check: string
  readonly status: FindingStatus
  /** What was found, one line. */
  readonly found: string
  /** What to change, one line; absent when status is ok. */
  readonly fix?: string
}

export interface DoctorReport {
  readonly server: string
  readonly findings: readonly Finding[]
}

/** 0 when nothing fails (every feature the cluster's classes use works), 1 otherwise; warnings never fail. */
export function doctorExitCode(findings: readonly Finding[]): number {
  return findings.some((f) => f.status === 'fail') ? ExitCode.failed : ExitCode.ok
}
