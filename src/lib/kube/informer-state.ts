import {backoffMs, type BackoffPolicy} from '../backoff.js'

/**
 * The informer's life as one state value instead of loose flags, so no two flags can contradict each
 * other. Pure transitions: the informer loop asks what to do next, and time, randomness and I/O stay outside.
 */
export type InformerState =
  | {readonly phase: 'listing'; readonly failures: number}
  /** `failures`: attempts that failed in a row before this watch; reset once a watch is open. */
  | {readonly phase: 'watching'; readonly resourceVersion: string; readonly failures: number}
  | {readonly phase: 'waiting'; readonly failures: number; readonly resourceVersion?: string}
  | {readonly phase: 'stopped'}

/** How a list or watch ended. `gone`: 410, the resourceVersion is too old; `closed`: normal end of a watch. */
export type Ending = 'closed' | 'failed' | 'gone'

export const initialInformerState: InformerState = {failures: 0, phase: 'listing'}

export function afterList(state: InformerState, result: {ok: true; resourceVersion: string} | {ok: false}): InformerState {
  if (state.phase !== 'listing') return state // stop() always wins
  if (result.ok) return {failures: 0, phase: 'watching', resourceVersion: result.resourceVersion}
  return {failures: state.failures + 1, phase: 'waiting'}
}

export function afterWatch(state: InformerState, ending: Ending, lastResourceVersion: string): InformerState {
  if (state.phase !== 'watching') return state
  if (ending === 'closed') return {failures: 0, phase: 'watching', resourceVersion: lastResourceVersion} // re-watch, no back-off
  if (ending === 'gone') return {failures: 0, phase: 'listing'} // relist, diff, emit deletes
  return {failures: state.failures + 1, phase: 'waiting', resourceVersion: lastResourceVersion} // back off longer each time
}

/** The server accepted the watch: the connection works again, so back-off starts over. */
export function watchOpened(state: InformerState): InformerState {
  return state.phase === 'watching' ? {...state, failures: 0} : state
}

/** After the back-off: resume the watch where it was, or list again when there is nothing to resume from. */
export function afterWait(state: InformerState): InformerState {
  if (state.phase !== 'waiting') return state
  return state.resourceVersion === undefined ? {failures: state.failures, phase: 'listing'} : {failures: state.failures, phase: 'watching', resourceVersion: state.resourceVersion}
}

/** A watch that fails right after resuming counts as another failure, so back-off keeps growing. */
export function failuresOf(state: InformerState): number {
  return state.phase === 'stopped' ? 0 : state.failures
}

/** The informer's back-off: 1 s doubling to 30 s, with ±20 % jitter (every agent's watches break at once when the API server restarts). */
export function reconnectPolicy(baseMs = 1000, maxMs = 30_000): BackoffPolicy {
  return {baseMs, jitter: [0.8, 1.2], maxMs}
}

/** Back-off before the next attempt, by the shared formula with the informer's policy. */
export function reconnectDelayMs(failures: number, random: number, baseMs?: number, maxMs?: number): number {
  return backoffMs(reconnectPolicy(baseMs, maxMs), failures, random)
}

/** Objects present before a relist and absent after it: deletions the watch missed (tombstones). */
export function vanished<T>(before: ReadonlyMap<string, T>, after: ReadonlyMap<string, T>): T[] {
  return [...before].filter(([key]) => !after.has(key)).map(([, value]) => value)
}
