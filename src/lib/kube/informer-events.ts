import {Signal} from '../signal.js'
import type {InformerOptions} from './informer.js'

/** What an informer tells: an object added or changed (`object` undefined: the cache replaced by a relist), or deleted. */
export type InformerEvent<T> = {readonly type: 'changed'; readonly object: T | undefined; readonly previous?: T} | {readonly type: 'deleted'; readonly object: T}

/** What a part reads of an informer that someone else built: its cache and the lifecycle it drives. */
export interface ObjectCache<T> {
  readonly synced: boolean
  readonly cache: ReadonlyMap<string, T>
  start(signal: AbortSignal): Promise<void>
  stop(): Promise<void>
}

/** An informer and its events, as the builder hands them to the part that follows them. */
export interface Followed<T> {
  readonly objects: ObjectCache<T>
  readonly events: Signal<InformerEvent<T>>
}

/** The informer options that pass its changes on as events (onChanged, onDeleted). */
export function relayTo<T>(events: Signal<InformerEvent<T>>): Pick<InformerOptions<T>, 'onChanged' | 'onDeleted'> {
  return {
    onChanged: (object, previous) => events.emit({object, previous, type: 'changed'}),
    onDeleted: (object) => events.emit({object, type: 'deleted'}),
  }
}

/** An informer built with options that relay its changes, and those changes as one signal. */
export function followed<T>(build: (relay: Pick<InformerOptions<T>, 'onChanged' | 'onDeleted'>) => ObjectCache<T>): Followed<T> {
  const events = new Signal<InformerEvent<T>>()
  return {events, objects: build(relayTo(events))}
}
