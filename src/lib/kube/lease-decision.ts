/** The parts of a coordination.k8s.io/v1 Lease spec that leader election reads. */
export interface LeaseRecord {
  readonly holderIdentity?: string
  readonly leaseDurationSeconds?: number
  readonly leaseTransitions?: number
}

/**
 * What a candidate should do with the Lease as it stands. Like client-go, expiry is judged on our own
 * clock from when we last saw the record change (`observedAtMs`), never from the holder's timestamps, so
 * clock skew between replicas cannot steal a live lease. Pure.
 */
export function decideLease(record: LeaseRecord | undefined, observedAtMs: number, identity: string, nowMs: number): 'acquire' | 'create' | 'renew' | 'wait' {
  if (record === undefined) return 'create'
  if (record.holderIdentity === identity) return 'renew'
  if (!record.holderIdentity) return 'acquire' // released on shutdown
  const durationMs = (record.leaseDurationSeconds ?? 15) * 1000
  return nowMs >= observedAtMs + durationMs ? 'acquire' : 'wait'
}

/** Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')
}
