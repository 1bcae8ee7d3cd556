import {AbortedError, errorMessage} from '../errors.js'
import {noopLogger, type Logger} from '../observe/logger.js'
import {RetryTimer, type RetryTimers} from '../retry-timer.js'
import {isStatus} from './api-error.js'
import {afterList, afterWait, afterWatch, failuresOf, initialInformerState, reconnectPolicy, vanished, watchOpened, type Ending, type InformerState} from './informer-state.js'
import type {KubeClient} from './kube-client.js'
import {listObjects, metadataCodecOf, type ObjectCodec} from './metadata-list.js'
import type {KeptMetadata} from './protobuf-metadata.js'
import {collectionPath, describeResource, type ObjectMeta, type ResourceRef} from './resource.js'

/** What an informer asks of the API server: list pages and watch streams. */
export type InformerClient = Pick<KubeClient, 'openWatch' | 'request'>

export interface InformerOptions<T = ObjectMeta> {
  readonly client: InformerClient
  readonly resource: ResourceRef
  readonly pageSize: number
  /** e.g. spec.nodeName=worker-1: only these objects are listed and watched. */
  readonly fieldSelector?: string
  readonly logger?: Logger
  /** A deletion seen on the watch, or found by diffing a relist (a missed deletion). */
  readonly onDeleted?: (object: T) => void
  /**
   * An object added or changed on the watch, with what the cache held before (undefined: new), or the cache
   * replaced by a relist (`undefined`).
   */
  readonly onChanged?: (object: T | undefined, previous?: T) => void
  readonly random?: () => number
  /** Server-side watch timeout; the watch is then resumed from the last resourceVersion. */
  readonly watchTimeoutSeconds?: number
  readonly reconnectBaseMs?: number
  /** Reconnect a watch that delivered no event or bookmark for this long (default 150 s). */
  readonly watchIdleTimeoutMs?: number
  /** The connection was made or lost (once per change, as logged), for a supervisor's view of the API server. */
  readonly onConnection?: (connected: boolean, error?: unknown) => void
  /** The reconnect back-off's and the idle timeout's timers: the real ones by default, a virtual clock in unit tests. */
  readonly timers?: RetryTimers
}

// Ref'd, unlike RetryTimer's: an open watch keeps the process alive anyway.
const idleTimers: RetryTimers = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  set: (fn, ms) => setTimeout(fn, ms),
}

interface WatchEvent {
  type: 'ADDED' | 'BOOKMARK' | 'DELETED' | 'ERROR' | 'MODIFIED'
  object: {metadata?: ObjectMeta; code?: number; reason?: string; message?: string}
}

/**
 * A list+watch cache of one resource that never gives up: 410 relists and emits the deletions it missed,
 * any other failure reconnects with back-off from the last resourceVersion, and connection changes are
 * reported once per change, not once per attempt. The codec says what is kept of each object.
 */
export class Informer<T> {
  readonly cache = new Map<string, T>()
  #state: InformerState = initialInformerState
  #synced = false
  #connected?: boolean
  #controller?: AbortController
  #loop?: Promise<void>
  readonly #log: Logger
  /** The wait before a relist or re-watch; the failures are counted by the state machine. */
  readonly #reconnect: RetryTimer

  constructor(
    readonly options: InformerOptions<T>,
    private readonly codec: ObjectCodec<T>,
  ) {
    this.#log = options.logger ?? noopLogger
    this.#reconnect = new RetryTimer({backoff: reconnectPolicy(options.reconnectBaseMs), random: options.random, timers: options.timers})
  }

  /** True once the first list has filled the cache. */
  get synced(): boolean {
    return this.#synced
  }

  /** True while the cache is being kept current (the last list or watch succeeded). */
  get connected(): boolean {
    return this.#connected === true
  }

  /** Starts listing and watching; resolves once the cache is synced (retrying the first list until it is). */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#loop) throw new Error('informer already started')
    if (signal.aborted) throw new AbortedError(`stopped before ${describeResource(this.options.resource)} was listed`)
    const controller = new AbortController()
    this.#controller = controller
    signal.addEventListener('abort', () => controller.abort(signal.reason), {once: true})
    let resolveSynced!: () => void
    const synced = new Promise<void>((resolve) => (resolveSynced = resolve))
    this.#loop = this.#run(controller.signal, resolveSynced)
    await Promise.race([synced, this.#loop])
    if (controller.signal.aborted) throw new AbortedError(`stopped before ${describeResource(this.options.resource)} was synced`)
  }

  /** Stops watching and waits for the loop to end. Idempotent; safe before start. */
  async stop(): Promise<void> {
    this.#controller?.abort(new Error('informer stopped'))
    this.#state = {phase: 'stopped'}
    await this.#loop
  }

  async #run(signal: AbortSignal, resolveSynced: () => void): Promise<void> {
    let lastResourceVersion = ''
    while (!signal.aborted && this.#state.phase !== 'stopped') {
      const state = this.#state
      if (state.phase === 'listing') {
        try {
          const list = await listObjects(this.options.client, this.options.resource, this.codec, {fieldSelector: this.options.fieldSelector, pageSize: this.options.pageSize, signal})
          const fresh = new Map(list.items.map((o) => [key(this.codec.metaOf(o)), o]))
          const missed = this.#synced ? vanished(this.cache, fresh) : []
          this.cache.clear()
          for (const [k, o] of fresh) this.cache.set(k, o)
          lastResourceVersion = list.resourceVersion
          this.#state = afterList(this.#state, {ok: true, resourceVersion: list.resourceVersion})
          this.#setConnected(true)
          if (!this.#synced) {
            this.#synced = true
            resolveSynced()
          }
          for (const object of missed) this.options.onDeleted?.(object)
          this.options.onChanged?.(undefined)
        } catch (error) {
          if (signal.aborted) break
          this.#setConnected(false, error)
          this.#state = afterList(this.#state, {ok: false})
        }
      } else if (state.phase === 'watching') {
        const ending = await this.#watch(state.resourceVersion, signal, (rv) => (lastResourceVersion = rv))
        if (signal.aborted) break
        this.#state = afterWatch(this.#state, ending, lastResourceVersion || state.resourceVersion)
      } else if (state.phase === 'waiting') {
        if (!(await this.#reconnect.wait(signal, failuresOf(state)))) break
        this.#state = afterWait(this.#state)
      }
    }
  }

  async #watch(resourceVersion: string, signal: AbortSignal, seen: (rv: string) => void): Promise<Ending> {
    const timeoutSeconds = this.options.watchTimeoutSeconds ?? 240 + Math.floor(120 * (this.options.random ?? Math.random)())
    // A half-open connection delivers nothing and never errors: with bookmarks asked for, a healthy watch
    // hears something about once a minute, so silence for longer means reconnect.
    const idleMs = this.options.watchIdleTimeoutMs ?? 150_000
    const idle = new AbortController()
    const timers = this.options.timers ?? idleTimers
    let idleTimer: unknown
    const armIdle = (): void => {
      timers.clear(idleTimer)
      idleTimer = timers.set(() => idle.abort(new Error(`no watch event or bookmark for ${idleMs / 1000}s`)), idleMs)
    }
    try {
      armIdle()
      const events = await this.options.client.openWatch(collectionPath(this.options.resource), {
        accept: this.codec.watchAccept,
        query: {allowWatchBookmarks: true, fieldSelector: this.options.fieldSelector, resourceVersion, timeoutSeconds, watch: true},
        signal: AbortSignal.any([signal, idle.signal]),
        timeoutMs: (timeoutSeconds + 30) * 1000,
      })
      this.#state = watchOpened(this.#state)
      this.#setConnected(true)
      for await (const raw of events) {
        armIdle()
        const event = raw as WatchEvent
        if (event.type === 'ERROR') {
          // A 410 inside a 200 stream: our resourceVersion is older than the watch cache keeps.
          if (event.object.code === 410) return 'gone'
          this.#setConnected(false, new Error(`watch error event ${event.object.code ?? ''}: ${event.object.message ?? ''}`))
          return 'failed'
        }
        const meta = event.object.metadata
        if (!meta) continue
        if (meta.resourceVersion) seen(meta.resourceVersion)
        if (event.type === 'BOOKMARK') continue
        const item = this.codec.toItem(event.object)
        if (item === undefined) continue
        if (event.type === 'DELETED') {
          this.cache.delete(key(meta))
          this.options.onDeleted?.(item)
        } else {
          const previous = this.cache.get(key(meta))
          this.cache.set(key(meta), item)
          this.options.onChanged?.(item, previous)
        }
      }
      return 'closed'
    } catch (error) {
      if (signal.aborted) return 'closed'
      if (isStatus(error, 'Gone')) return 'gone'
      this.#setConnected(false, idle.signal.aborted ? idle.signal.reason : error)
      return 'failed'
    } finally {
      timers.clear(idleTimer)
    }
  }

  #setConnected(connected: boolean, error?: unknown): void {
    if (this.#connected === connected) return
    const before = this.#connected
    this.#connected = connected
    const resource = describeResource(this.options.resource)
    if (connected && before === false) this.#log.info({resource}, 'watch reconnected')
    if (!connected) this.#log.warn({err: errorMessage(error), resource}, 'watch connection lost; retrying with back-off')
    this.options.onConnection?.(connected, error)
  }
}

function key(o: ObjectMeta): string {
  return o.namespace ? `${o.namespace}/${o.name}` : o.name
}

/** A cache of metadata only (`gc run`'s Nodes, without their labels; the agent's Node and namespaces, with them). */
export class MetadataInformer extends Informer<ObjectMeta> {
  constructor(options: InformerOptions, kept: KeptMetadata = {labels: true}) {
    super(options, metadataCodecOf(kept))
  }
}
