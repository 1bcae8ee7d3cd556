import type {Followed, InformerEvent, ObjectCache} from '../../src/lib/kube/informer-events.js'
import {Signal} from '../../src/lib/signal.js'

/**
 * An informer's cache and lifecycle without an API server: `list()` is the API server's first (or next)
 * list, `change()` and `remove()` its watch events, told on `events` the way Informer tells them (a list
 * resolves start() first, then says the cache was replaced). `start()` waits for the first list.
 */
export class FakeInformer<T> implements ObjectCache<T>, Followed<T> {
  readonly cache = new Map<string, T>()
  readonly events = new Signal<InformerEvent<T>>()
  readonly objects: ObjectCache<T> = this
  synced = false
  started = 0
  stopped = 0
  readonly #listed: {promise: Promise<void>; resolve: () => void}

  constructor(
    /** The cache key of an object (Informer's: namespace/name, or name). */
    readonly keyOf: (object: T) => string,
  ) {
    let resolve!: () => void
    this.#listed = {promise: new Promise<void>((r) => (resolve = r)), resolve}
  }

  start(signal: AbortSignal): Promise<void> {
    this.started++
    return new Promise<void>((resolve, reject) => {
      signal.addEventListener('abort', () => reject(new Error('stopped before the first list')), {once: true})
      void this.#listed.promise.then(resolve)
    })
  }

  async stop(): Promise<void> {
    this.stopped++
  }

  list(objects: readonly T[]): void {
    this.cache.clear()
    for (const o of objects) this.cache.set(this.keyOf(o), o)
    this.synced = true
    this.#listed.resolve()
    this.events.emit({object: undefined, type: 'changed'})
  }

  change(object: T): void {
    const previous = this.cache.get(this.keyOf(object))
    this.cache.set(this.keyOf(object), object)
    this.events.emit({object, previous, type: 'changed'})
  }

  remove(object: T): void {
    this.cache.delete(this.keyOf(object))
    this.events.emit({object, type: 'deleted'})
  }
}

/** Informer's cache key for an object with metadata (namespace/name, or name when cluster-scoped). */
export const metaKey = (o: {metadata: {namespace?: string; name: string}}): string => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name)
