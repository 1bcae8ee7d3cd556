import {setTimeout as sleep} from 'node:timers/promises'

import type {BackoffPolicy} from '../backoff.js'
import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {Followed, InformerEvent} from '../kube/informer-events.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {ObjectMeta} from '../kube/resource.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer, type RetryTimers} from '../retry-timer.js'
import type {ClassStateFile} from './class-state-file.js'
import {classView, type ClassView} from './class-view.js'
import {deviceClassCodec, type ClassItem} from './class-informers.js'
import {deviceClassesPath} from './cluster-classes.js'
import {classesForNode} from './node-classes.js'
import type {DeviceClass} from './types.js'

export interface ClassStoreOptions {
  readonly nodeName: string
  /** The cluster's DeviceClasses (an informer with deviceClassCodec) and what it tells. */
  readonly classes: Followed<ClassItem>
  /** The node's own Node object (a metadata informer on metadata.name), for its labels. */
  readonly node: Followed<ObjectMeta>
  /** Reads an edited class whole. */
  readonly client: Pick<KubeClient, 'request'>
  /** The copy of the node's classes under --state-dir. */
  readonly persisted: Pick<ClassStateFile, 'file' | 'read' | 'settled' | 'write'>
  readonly fileClasses: readonly DeviceClass[]
  readonly logger: Logger
  /** How long start() waits for the API server before it uses the persisted classes (default 3 s). */
  readonly startGraceMs?: number
  /** The timers of a failed read's retry (the real ones by default). */
  readonly retryTimers?: RetryTimers
}

/** How long a failed read of an edited class waits before the next try. */
const readRetry: BackoffPolicy = {baseMs: 2000, maxMs: 30_000}

/**
 * The node's DeviceClasses: the cluster's, followed live (the class informer, and the Node's for its labels,
 * which nodeSelectors read), plus the class files. Every change of what the node uses is persisted; when the
 * API server cannot be reached at start, the persisted classes are used and the store catches up once it
 * answers.
 */
export class ClassStore {
  readonly #log: Logger
  #lastValid = new Map<string, DeviceClass>()
  #labels: Record<string, string> = {}
  /** Each cluster class with its spec, at the generation last read. */
  #specs = new Map<string, ClassItem>()
  /** GETs of edited classes, one after another so that the last edit wins. */
  #reading: Promise<void> = Promise.resolve()
  #view: ClassView = {applicable: [], invalid: []}
  #viewKey = ''
  #synced = false
  #stopped = false
  #nodeMissing = false
  #listener: ((view: ClassView) => void) | undefined

  constructor(readonly options: ClassStoreOptions) {
    this.#log = options.logger
    // Most updates change nothing here: status writes (the agents' own) keep a class's generation, and
    // kubelet's heartbeats keep the Node's labels. Only the others make the view be computed again.
    options.classes.events.listen((event) => this.#classEvent(event))
    options.node.events.listen((event) => {
      const node = event.object
      if (event.type === 'deleted' || node === undefined || JSON.stringify(node.labels ?? {}) !== JSON.stringify(this.#labels)) this.#refresh()
    })
  }

  get view(): ClassView {
    return this.#view
  }

  /** The cluster's classes (their last valid spec), whichever nodes they select. */
  get clusterClasses(): DeviceClass[] {
    return [...this.#lastValid.values()]
  }

  /** True once the cluster's classes and the node's labels have been read. */
  get synced(): boolean {
    return this.#synced
  }

  /** Called after every change of the view (not for the first one, which start() returns). */
  onChange(listener: (view: ClassView) => void): void {
    this.#listener = listener
  }

  /**
   * Reads the cluster's classes; when the API server has not answered within the grace period and classes
   * were persisted, those are used (and the cluster's taken over when it answers). Without either it waits.
   */
  async start(signal: AbortSignal): Promise<{source: 'cluster' | 'state-dir'; view: ClassView}> {
    const {classes, node, persisted} = this.options
    const synced = Promise.all([classes.objects.start(signal), node.objects.start(signal)]).then(() => true)
    synced.catch(() => {}) // aborted: start() reports it below, or the agent is stopping
    const grace = sleep(this.options.startGraceMs ?? 3000, false, {signal}).catch(() => false)
    if (await Promise.race([synced, grace])) return {source: 'cluster', view: this.#takeCluster()}
    const state = await persisted.read()
    if (state === undefined) {
      this.#log.warn({file: persisted.file}, 'the API server does not answer and no classes are persisted yet; waiting for it')
      await synced
      return {source: 'cluster', view: this.#takeCluster()}
    }
    // The persisted classes are the last valid ones: a cluster that answers later starts from them.
    this.#lastValid = new Map(state.classes.map((c) => [c.metadata.name, c]))
    this.#labels = state.nodeLabels
    this.#setView({applicable: classesForNode(this.options.fileClasses, this.#lastValid.values(), this.#labels).applicable, invalid: []})
    this.#log.warn(
      {classes: this.#view.applicable.map((c) => c.metadata.name), file: persisted.file, savedAt: state.savedAt},
      'the API server does not answer; using the classes persisted under --state-dir until it does',
    )
    void synced.then(
      () => {
        this.#log.info({}, "the API server answers; following the cluster's classes")
        this.#listener?.(this.#takeCluster())
      },
      () => {},
    )
    return {source: 'state-dir', view: this.#view}
  }

  async stop(): Promise<void> {
    this.#stopped = true
    await Promise.all([this.options.classes.objects.stop(), this.options.node.objects.stop()])
    await this.#reading
    await this.options.persisted.settled()
  }

  #classEvent(event: InformerEvent<ClassItem>): void {
    const item = event.object
    if (event.type === 'deleted') {
      this.#specs.delete(event.object.metadata.name)
      this.#refresh()
    } else if (item === undefined) {
      this.#takeList()
      this.#refresh()
    } else if (this.#specs.get(item.metadata.name)?.metadata.generation !== item.metadata.generation) this.#readSpec(item)
  }

  /** A (re)list: whole objects, specs included. */
  #takeList(): void {
    this.#specs = new Map([...this.options.classes.objects.cache.values()].filter((c) => c.spec !== undefined).map((c) => [c.metadata.name, c]))
  }

  /**
   * A class edited (its generation moved): its spec, read once. A class deleted meanwhile is left to its
   * delete event; a failed read is tried again after a back-off (2 s doubling to 30 s), the previous spec
   * staying in use meanwhile.
   */
  #readSpec(item: ClassItem, retry?: RetryTimer): void {
    const {name, uid} = item.metadata
    const cache = this.options.classes.objects.cache
    this.#reading = this.#reading.then(async () => {
      const watched = cache.get(name)
      if (this.#stopped || watched?.metadata.uid !== uid || this.#specs.get(name)?.metadata.generation === watched.metadata.generation) return
      try {
        const object = deviceClassCodec.toItem(await this.options.client.request('GET', `${deviceClassesPath}/${encodeURIComponent(name)}`))
        if (object === undefined || object.metadata.uid !== uid || cache.get(name)?.metadata.uid !== uid) return
        this.#specs.set(name, object)
        this.#refresh()
      } catch (error) {
        if (isStatus(error, 'NotFound') || this.#stopped) return
        const again = retry ?? new RetryTimer({backoff: readRetry, timers: this.options.retryTimers})
        const waitMs = again.failed(() => this.#readSpec(item, again))
        this.#log.warn({class: name, err: errorMessage(error), retryInMs: waitMs}, 'cannot read an edited DeviceClass; its previous spec stays in use, trying again')
      }
    })
  }

  #takeCluster(): ClassView {
    this.#synced = true
    this.#takeList()
    this.#refresh(false)
    return this.#view
  }

  /** Recomputes the view from the informers' caches; a change is persisted and reported. */
  #refresh(notify = true): void {
    if (!this.#synced) return
    const node = this.options.node.objects.cache.get(this.options.nodeName)
    if ((node === undefined) !== this.#nodeMissing) {
      this.#nodeMissing = node === undefined
      if (this.#nodeMissing) this.#log.warn({node: this.options.nodeName}, 'the Node is not in the cluster; nodeSelectors see no labels (set --node-name)')
    }
    this.#labels = {...node?.labels}
    const items = [...this.#specs.values()]
    const {lastValid, view} = classView({clusterItems: items, fileClasses: this.options.fileClasses, lastValid: this.#lastValid, nodeLabels: this.#labels})
    this.#lastValid = lastValid
    const before = new Set(this.#view.invalid.map((p) => `${p.name}@${p.generation}`))
    if (!this.#setView(view)) return
    for (const problem of view.invalid) {
      if (before.has(`${problem.name}@${problem.generation}`)) continue // reported already
      this.#log.warn(
        {class: problem.name, generation: problem.generation, problem: problem.message, using: problem.using},
        problem.using === undefined ? 'DeviceClass is invalid and not served' : 'DeviceClass is invalid; its last valid spec stays in use',
      )
    }
    this.options.persisted.write([...this.#lastValid.values()], this.#labels)
    if (notify) this.#listener?.(view)
  }

  #setView(view: ClassView): boolean {
    const key = JSON.stringify(view)
    if (key === this.#viewKey) return false
    this.#view = view
    this.#viewKey = key
    return true
  }
}
