import type {StaleObject} from './sweep-planner.js'

/** When an object was first seen stale, keyed by UID (a re-created object is a new entry). */
export type StaleSightings = ReadonlyMap<string, {readonly firstSeenMs: number; readonly object: StaleObject}>

export interface Observation {
  readonly sightings: StaleSightings
  /** Seen stale twice, at least the grace period apart: may be deleted now. */
  readonly due: readonly StaleObject[]
  /** When the earliest not-yet-due object becomes due; undefined when none waits. */
  readonly nextDueMs?: number
}

/**
 * Records one observation of stale objects. `scope: 'all'` is a full sweep: an object it did not see stale
 * (gone, or its node is back) is forgotten. `scope: 'seen'` is a targeted look at some objects only.
 * With a grace period of 0 every stale object is due at once. Pure.
 */
export function observeStale(sightings: StaleSightings, stale: readonly StaleObject[], nowMs: number, graceMs: number, scope: 'all' | 'seen'): Observation {
  const next = new Map(scope === 'all' ? [] : sightings)
  for (const object of stale) {
    const earlier = sightings.get(object.meta.uid)
    next.set(object.meta.uid, {firstSeenMs: earlier?.firstSeenMs ?? nowMs, object})
  }
  // Only what was seen now can be due: an earlier sighting alone is never a second observation.
  const seenNow = new Set(stale.map((s) => s.meta.uid))
  const due: StaleObject[] = []
  let nextDueMs: number | undefined
  for (const {firstSeenMs, object} of next.values()) {
    const dueAt = firstSeenMs + graceMs
    if (dueAt <= nowMs && seenNow.has(object.meta.uid)) due.push(object)
    else if (dueAt > nowMs) nextDueMs = nextDueMs === undefined ? dueAt : Math.min(nextDueMs, dueAt)
  }
  return {due, nextDueMs, sightings: next}
}

/** Drops objects that need no more watching (deleted, already gone, or replaced by a new UID). */
export function forgetStale(sightings: StaleSightings, uids: Iterable<string>): StaleSightings {
  const next = new Map(sightings)
  for (const uid of uids) next.delete(uid)
  return next
}

/**
 * When to look again at pending objects: when the earliest one becomes due; one already past due (seen
 * once only, or its deletion failed) is looked at one grace period (at least 1 s) from now, never in a
 * hot loop. Undefined when nothing is pending. Pure.
 */
export function recheckAtMs(sightings: StaleSightings, nowMs: number, graceMs: number): number | undefined {
  let next: number | undefined
  for (const {firstSeenMs} of sightings.values()) {
    const dueAt = firstSeenMs + graceMs
    const at = dueAt > nowMs ? dueAt : nowMs + Math.max(graceMs, 1000)
    next = next === undefined ? at : Math.min(next, at)
  }
  return next
}
