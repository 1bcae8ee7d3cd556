import {AbortedError, errorMessage} from '../errors.js'
import {EventBatcher} from '../event-batcher.js'
import {MetadataInformer} from '../kube/informer.js'
import {returnIdleMemory} from '../memory.js'
import type {NativeMemoryTrim} from '../native-memory.js'
import type {KubeClient} from '../kube/kube-client.js'
import {nodesResource} from '../kube/resource.js'
import {noopLogger, type Logger} from '../observe/logger.js'
import {deleteStale} from './deleter.js'
import type {GcKind} from './kinds.js'
import type {GcMetrics} from './metrics.js'
import {staleWithExistingNode} from './live-nodes.js'
import {findObjectsNamedAfterNodes, findObjectsOfNodes} from './node-objects.js'
import {forgetStale, observeStale, recheckAtMs, type StaleSightings} from './stale-tracker.js'
import {readAndPlan} from './sweep.js'
import type {ObservedObject, PlanOptions, StaleObject} from './sweep-planner.js'

export interface CollectorOptions {
  readonly client: KubeClient
  readonly kinds: readonly GcKind[]
  readonly plan: PlanOptions
  readonly listSize: number
  readonly concurrency: number
  readonly intervalMs: number
  /** An object is deleted only once seen stale twice, at least this far apart. */
  readonly graceMs: number
  readonly logger?: Logger
  readonly metrics?: GcMetrics
  /** More node deletions than this in one batch run a full sweep instead of per-node lookups. */
  readonly massDeletionThreshold?: number
  readonly batchQuietMs?: number
  readonly batchMaxWaitMs?: number
  /** Test seam for real-server races: runs after the last check of the nodes, before deleting. */
  readonly beforeDelete?: (doomed: readonly StaleObject[]) => Promise<void>
  /**
   * Gives the C heap's free pages back to the kernel, told once a sweep's garbage is collected: the list
   * pages' TLS and HTTP buffers leave them behind (about 20 MB after listing 2,000 Nodes as NFD labels them).
   */
  readonly trim?: Pick<NativeMemoryTrim, 'afterWork'>
}

type Job = {type: 'nodes'; names: string[]} | {type: 'sweep'; why: string}

/**
 * `gc run`'s engine: a Node informer, a periodic full sweep, and a reaction to Node deletions (coalesced:
 * a burst becomes one batch, a mass scale-down one sweep). Work is serialised, so sweeps and reactions
 * never race each other. Objects are deleted only after two stale sightings --grace-period apart.
 */
export class Collector {
  readonly #informer: MetadataInformer
  readonly #log: Logger
  readonly #controller = new AbortController()
  #sightings: StaleSightings = new Map()
  /** Where the last sweep saw each namespaced kind's objects: where to look for an object by name. */
  #namespaces: ReadonlyMap<GcKind, ReadonlySet<string>> = new Map()
  #queue: Promise<void> = Promise.resolve()
  #sweepQueued = false
  #lastSweepOk = false
  #stopped = false
  #stopping?: Promise<void>
  #intervalTimer?: NodeJS.Timeout
  #recheckTimer?: NodeJS.Timeout
  /** Node deletions: a burst (a scale-down) waits for a pause, so that it is judged whole. */
  readonly #deletions: EventBatcher<string>

  constructor(readonly options: CollectorOptions) {
    if (!(options.intervalMs > 0)) throw new RangeError(`Expected intervalMs to be > 0, got ${options.intervalMs}`)
    if (!(options.graceMs >= 0)) throw new RangeError(`Expected graceMs to be >= 0, got ${options.graceMs}`)
    this.#log = options.logger ?? noopLogger
    // Names are all the collector reads of a Node: its labels (NFD's hundred) are not kept.
    this.#informer = new MetadataInformer(
      {
        client: options.client,
        logger: this.#log,
        onDeleted: (node) => this.#nodeDeleted(node.name),
        pageSize: options.listSize,
        resource: nodesResource,
      },
      {labels: false},
    )
    this.#deletions = new EventBatcher<string>({
      maxWaitMs: options.batchMaxWaitMs ?? 1000,
      onError: (error) => this.#log.error({err: errorMessage(error)}, 'reacting to deleted nodes failed; the next sweep catches up'),
      process: (names) => this.#nodesDeleted(names),
      quietMs: options.batchQuietMs ?? 100,
    })
  }

  /** For /readyz: ready, or what is missing. */
  status(): {ready: boolean; reason: string} {
    if (!this.#informer.synced) return {ready: false, reason: 'node cache not synced yet'}
    if (!this.#informer.connected) return {ready: false, reason: 'node watch disconnected; reconnecting'}
    if (!this.#lastSweepOk) return {ready: false, reason: 'the last sweep failed or was refused (see the logs)'}
    return {ready: true, reason: 'ok'}
  }

  /** Syncs the node cache and runs the first sweep; resolves when that sweep is done. */
  async start(signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw new AbortedError('stopped before the collector started')
    signal.addEventListener('abort', () => void this.stop(), {once: true})
    await this.#informer.start(this.#controller.signal)
    this.#log.info({nodes: this.#informer.cache.size}, 'node cache synced')
    await this.#enqueue({type: 'sweep', why: 'start'})
  }

  /** Stops timers and the watch, abandons in-flight requests, and waits for the current job. Idempotent. */
  stop(): Promise<void> {
    // Every caller waits for the same, complete stop.
    this.#stopping ??= this.#stop()
    return this.#stopping
  }

  async #stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#intervalTimer)
    clearTimeout(this.#recheckTimer)
    // A batch running waits for the queue, which the abort below ends.
    const deletions = this.#deletions.stop()
    this.#controller.abort(new Error('collector stopped'))
    await this.#informer.stop()
    await deletions
    await this.#queue
  }

  #nodeDeleted(name: string): void {
    if (!this.#stopped) this.#deletions.add(name)
  }

  #nodesDeleted(deleted: string[]): Promise<void> {
    const names = [...new Set(deleted)]
    // Large bursts, and bursts large for this cluster (all nodes of a small edge cluster, say), go through
    // a full sweep: it applies --max-delete-ratio and the empty-node guard that per-node lookups cannot.
    const relative = names.length > this.options.plan.maxDeleteRatio * (this.#informer.cache.size + names.length)
    if (names.length > (this.options.massDeletionThreshold ?? 20) || relative || this.#informer.cache.size === 0) {
      this.#log.info({nodes: names.length, remaining: this.#informer.cache.size}, 'many nodes deleted at once; one sweep instead of per-node lookups')
      return this.#enqueue({type: 'sweep', why: 'mass node deletion'})
    }
    return this.#enqueue({names, type: 'nodes'})
  }

  #enqueue(job: Job): Promise<void> {
    if (job.type === 'sweep') {
      if (this.#sweepQueued) return this.#queue
      this.#sweepQueued = true
    }
    this.#queue = this.#queue.then(async () => {
      if (this.#stopped) return
      if (job.type === 'sweep') {
        this.#sweepQueued = false
        await this.#sweep(job.why)
      } else {
        await this.#collectNodes(job.names)
      }
    })
    return this.#queue
  }

  async #sweep(why: string): Promise<void> {
    clearTimeout(this.#intervalTimer)
    const started = Date.now()
    const end = this.options.metrics?.sweepDuration.startTimer()
    try {
      if (!this.#informer.connected) throw new Error('the node watch is not connected, so the node cache may be stale')
      const read = await readAndPlan(
        this.options.client,
        {
          kinds: this.options.kinds,
          listSize: this.options.listSize,
          nodes: () => this.#informer.cache.keys(),
          onEvent: (e) => {
            if (e.type === 'list-failed') this.options.metrics?.listErrors.inc({resource: e.what})
          },
          signal: this.#controller.signal,
        },
        this.options.plan,
      )
      this.#namespaces = read.namespaces
      const {plan} = read
      for (const kind of this.options.kinds) this.options.metrics?.staleFound.set({kind: kind.kind}, plan.stale.filter((s) => s.kind === kind).length)
      for (const [kind, reason] of read.skipped) this.#log.warn({kind: kind.kind}, reason)
      if (plan.action === 'refuse') {
        this.options.metrics?.sweepsRefused.inc()
        this.#log.warn({stale: plan.stale.length}, plan.reason)
        this.#lastSweepOk = false
        return
      }
      const {deleted, failed} = await this.#observe(plan.stale, 'all')
      this.#lastSweepOk = failed === 0
      if (failed === 0) this.options.metrics?.lastSuccessfulSweep.set(Date.now() / 1000)
      this.#log.info(
        {
          deleted,
          durationMs: Date.now() - started,
          failed,
          nodes: read.nodes,
          pending: this.#sightings.size,
          scanned: read.objects,
          stale: plan.stale.length,
          trigger: why,
        },
        'sweep done',
      )
      returnIdleMemory()
      this.options.trim?.afterWork()
    } catch (error) {
      this.#lastSweepOk = false
      if (!this.#stopped) this.#log.error({err: errorMessage(error), trigger: why}, 'sweep failed; nothing deleted')
    } finally {
      end?.()
      if (!this.#stopped) {
        this.#intervalTimer = setTimeout(() => void this.#enqueue({type: 'sweep', why: 'interval'}), Math.max(0, started + this.options.intervalMs - Date.now()))
      }
    }
  }

  async #collectNodes(names: string[]): Promise<void> {
    const gone = names.filter((n) => !this.#informer.cache.has(n))
    const goneSet = new Set(gone)
    const staleOf = (objects: readonly ObservedObject[]): StaleObject[] =>
      objects.flatMap((o): StaleObject[] => {
        const node = o.kind.nodeOf(o.meta)
        return node !== undefined && goneSet.has(node) ? [{...o, node, reason: 'node-gone'}] : []
      })
    try {
      // First what is found by name, answered at once at any cluster size; then, for labelled kinds, the
      // label selector, which finds objects named otherwise too but costs the server a scan of the kind.
      // A node that came back meanwhile is caught by #deleteDue, which checks the cache and the API server.
      const named = staleOf(await findObjectsNamedAfterNodes(this.options.client, this.options.kinds, gone, (kind) => this.#namespaces.get(kind) ?? [], this.#controller.signal))
      const first = await this.#observe(named, 'seen')
      const handled = new Set(named.map((s) => s.meta.uid))
      const labelled = this.options.kinds.filter((k) => k.byNodes !== 'name')
      const rest = staleOf(await findObjectsOfNodes(this.options.client, labelled, gone, this.options.listSize, this.#controller.signal)).filter((s) => !handled.has(s.meta.uid))
      const second = await this.#observe(rest, 'seen')
      const deleted = first.deleted + second.deleted
      const failed = first.failed + second.failed
      this.#log.info({deleted, failed, found: named.length + rest.length, nodes: gone}, 'collected objects of deleted nodes')
    } catch (error) {
      if (!this.#stopped) this.#log.warn({err: errorMessage(error), nodes: gone}, 'could not collect objects of deleted nodes; the next sweep will')
    }
  }

  /** Records a sighting of these stale objects, deletes those that are due, and schedules the next look. */
  async #observe(stale: readonly StaleObject[], scope: 'all' | 'seen'): Promise<{deleted: number; failed: number}> {
    const observation = observeStale(this.#sightings, stale, Date.now(), this.options.graceMs, scope)
    this.#sightings = observation.sightings
    const result = await this.#deleteDue(observation.due)
    this.#armRecheck()
    return result
  }

  async #deleteDue(due: readonly StaleObject[]): Promise<{deleted: number; failed: number}> {
    if (due.length === 0) return {deleted: 0, failed: 0}
    // The cache can be frozen by a stalled watch: ask the API server itself whether the nodes are gone.
    // A node that exists (again) saves its objects; no answer deletes nothing (the caller logs the error).
    const alive = await staleWithExistingNode(this.options.client, due, this.options.listSize, this.#controller.signal)
    const back = due.filter((s) => alive.has(s) || (s.node !== undefined && this.#informer.cache.has(s.node)))
    this.#sightings = forgetStale(
      this.#sightings,
      back.map((s) => s.meta.uid),
    )
    if (back.length > 0) this.#log.info({nodes: [...new Set(back.map((s) => s.node))]}, 'nodes exist after all; their objects are kept')
    const doomed = due.filter((s) => !back.includes(s))
    if (doomed.length === 0) return {deleted: 0, failed: 0}
    await this.options.beforeDelete?.(doomed)
    const results = await deleteStale(this.options.client, doomed, {
      concurrency: this.options.concurrency,
      keepUnlabelled: this.options.plan.keepUnlabelled,
      listSize: this.options.listSize,
      signal: this.#controller.signal,
    })
    let deleted = 0
    let failed = 0
    for (const {error, object, outcome} of results) {
      const fields = {kind: object.kind.kind, name: object.meta.name, namespace: object.meta.namespace, node: object.node, reason: object.reason, uid: object.meta.uid}
      if (outcome === 'deleted') {
        deleted++
        this.options.metrics?.deleted.inc({kind: object.kind.kind})
        this.#log.info(fields, 'deleted stale object')
      } else if (outcome === 'failed') {
        failed++
        this.options.metrics?.deleteFailures.inc({kind: object.kind.kind})
        if (!this.#stopped) this.#log.warn({...fields, err: error}, 'could not delete stale object; will retry')
      } else if (outcome === 'absent') {
        this.#log.debug(fields, 'stale object already gone')
      } else {
        this.options.metrics?.kept.inc({kind: object.kind.kind, reason: outcome})
        this.#log.info({...fields, outcome}, outcome === 'changed' ? 'object changed since judged stale and is no longer stale; kept' : 'object was re-created; kept')
      }
    }
    // Failed deletions stay in the sightings and are retried by the next sweep.
    this.#sightings = forgetStale(
      this.#sightings,
      results.filter((r) => r.outcome !== 'failed').map((r) => r.object.meta.uid),
    )
    return {deleted, failed}
  }

  #armRecheck(): void {
    clearTimeout(this.#recheckTimer)
    if (this.#stopped || this.options.graceMs === 0) return
    const now = Date.now()
    const next = recheckAtMs(this.#sightings, now, this.options.graceMs)
    if (next === undefined) return
    // The second sighting: a sweep once the earliest pending object has waited out the grace period.
    this.#recheckTimer = setTimeout(() => void this.#enqueue({type: 'sweep', why: 'grace period elapsed'}), Math.max(0, next - now))
  }
}
