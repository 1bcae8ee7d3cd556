import {mkdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import type {BackoffPolicy} from '../backoff.js'
import {deviceClassesPath, deviceClassesResource, listedClass} from '../devices/cluster-classes.js'
import {classesForNode} from '../devices/node-classes.js'
import type {DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import {Informer, MetadataInformer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import {metadataObjectAccept, type ObjectCodec} from '../kube/metadata-list.js'
import {nodesResource, type ObjectMeta} from '../kube/resource.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import {writeFileAtomic} from '../sys/atomic-write.js'

/** A cluster class whose spec the agent cannot use. */
export interface ClassProblem {
  readonly name: string
  readonly generation?: number
  readonly message: string
  /** The generation of the last valid spec, which the node keeps using; undefined: the class is not served. */
  readonly using?: number
}

/** The classes a node works with, and the ones it reports as invalid. */
export interface ClassView {
  /** Valid classes (or their last valid spec) whose nodeSelector selects the node. */
  readonly applicable: readonly DeviceClass[]
  readonly invalid: readonly ClassProblem[]
}

export interface ClassViewInput {
  /** From --class-file: already valid. */
  readonly fileClasses: readonly DeviceClass[]
  /** The cluster's DeviceClass objects as listed (no apiVersion or kind on list items). */
  readonly clusterItems: Iterable<unknown>
  /** The last valid spec of each cluster class, from earlier views. */
  readonly lastValid: ReadonlyMap<string, DeviceClass>
  readonly nodeLabels: Readonly<Record<string, string>>
}

/**
 * Pure: validates the cluster's classes and picks the node's. A class whose new spec is invalid keeps its
 * last valid one, so that a typo in an edit does not take devices away from running containers; the
 * problem is reported either way. A class that is gone from the cluster is gone (its access is withdrawn).
 */
export function classView(input: ClassViewInput): {view: ClassView; lastValid: Map<string, DeviceClass>} {
  const lastValid = new Map<string, DeviceClass>()
  const invalid: ClassProblem[] = []
  for (const item of input.clusterItems) {
    const listed = listedClass(item)
    if (listed.ok) {
      lastValid.set(listed.deviceClass.metadata.name, listed.deviceClass)
      continue
    }
    const {generation, message, name} = listed
    const previous = input.lastValid.get(name)
    if (previous !== undefined) lastValid.set(name, previous)
    invalid.push({generation, message, name, using: previous?.metadata.generation})
  }
  const {applicable} = classesForNode(input.fileClasses, lastValid.values(), input.nodeLabels)
  return {lastValid, view: {applicable, invalid: invalid.sort((a, b) => a.name.localeCompare(b.name))}}
}

/** What `--state-dir` keeps: enough to serve the node's classes when the API server is away at start. */
interface ClassState {
  readonly version: 1
  readonly node: string
  readonly savedAt: string
  readonly nodeLabels: Record<string, string>
  readonly classes: DeviceClass[]
}

export interface ClassStoreOptions {
  readonly client: KubeClient
  readonly nodeName: string
  readonly stateDir: string
  readonly fileClasses: readonly DeviceClass[]
  readonly logger: Logger
  /** How long start() waits for the API server before it uses the persisted classes (default 3 s). */
  readonly startGraceMs?: number
  /** A persisting failure, for the caller's metrics. */
  readonly onPersistError?: (error: unknown) => void
}

type ClassItem = {metadata: ObjectMeta & {generation?: number}; spec?: unknown}

/** How long a failed read of an edited class waits before the next try. */
const readRetry: BackoffPolicy = {baseMs: 2000, maxMs: 30_000}

/**
 * Lists are whole objects (the specs), the watch is metadata only: every agent's status writes change the
 * classes, and each of them would otherwise reach every agent with the whole status.nodes of the cluster.
 * A watched change of generation (a spec edit) is then read with one GET.
 */
const deviceClassCodec: ObjectCodec<ClassItem> = {
  listAccept: 'application/json',
  metaOf: (item) => item.metadata,
  toItem: (raw) => {
    const {metadata, spec} = raw as ClassItem
    if (metadata === undefined) return undefined
    return {metadata: {generation: metadata.generation, name: metadata.name, resourceVersion: metadata.resourceVersion, uid: metadata.uid}, spec}
  },
  watchAccept: metadataObjectAccept,
}

/**
 * The agent's DeviceClasses: the cluster's, followed live (an informer on the classes and one on the
 * node's own labels, for nodeSelectors), plus the class files. Every change of what the node uses is
 * persisted atomically under --state-dir; when the API server cannot be reached at start, the persisted
 * classes are used and the store catches up once it answers.
 */
export class ClassStore {
  readonly #classes: Informer<ClassItem>
  readonly #node: MetadataInformer
  readonly #log: Logger
  readonly #file: string
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
  #persisting: Promise<void> = Promise.resolve()
  #listener: ((view: ClassView) => void) | undefined

  constructor(readonly options: ClassStoreOptions) {
    this.#log = options.logger
    this.#file = join(options.stateDir, 'classes.json')
    const onChanged = (): void => this.#refresh()
    // Most updates change nothing here: status writes (the agents' own) keep a class's generation, and
    // kubelet's heartbeats keep the Node's labels. Only the others make the view be computed again.
    this.#classes = new Informer(
      {
        client: options.client,
        logger: options.logger,
        pageSize: 500,
        resource: deviceClassesResource,
        onChanged: (item) => {
          if (item === undefined) {
            this.#takeList()
            this.#refresh()
          } else if (this.#specs.get(item.metadata.name)?.metadata.generation !== item.metadata.generation) this.#readSpec(item)
        },
        onDeleted: (item) => {
          this.#specs.delete(item.metadata.name)
          this.#refresh()
        },
      },
      deviceClassCodec,
    )
    this.#node = new MetadataInformer({
      client: options.client,
      fieldSelector: `metadata.name=${options.nodeName}`,
      logger: options.logger,
      onDeleted: onChanged,
      onChanged: (node) => {
        if (node === undefined || JSON.stringify(node.labels ?? {}) !== JSON.stringify(this.#labels)) this.#refresh()
      },
      pageSize: 0,
      resource: nodesResource,
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
    const synced = Promise.all([this.#classes.start(signal), this.#node.start(signal)]).then(() => true)
    synced.catch(() => {}) // aborted: start() reports it below, or the agent is stopping
    const grace = sleep(this.options.startGraceMs ?? 3000, false, {signal}).catch(() => false)
    if (await Promise.race([synced, grace])) return {source: 'cluster', view: this.#takeCluster()}
    const persisted = await this.#readState()
    if (persisted === undefined) {
      this.#log.warn({stateDir: this.options.stateDir}, 'the API server does not answer and no classes are persisted yet; waiting for it')
      await synced
      return {source: 'cluster', view: this.#takeCluster()}
    }
    // The persisted classes are the last valid ones: a cluster that answers later starts from them.
    this.#lastValid = new Map(persisted.classes.map((c) => [c.metadata.name, c]))
    this.#labels = persisted.nodeLabels
    this.#setView({applicable: classesForNode(this.options.fileClasses, this.#lastValid.values(), this.#labels).applicable, invalid: []})
    this.#log.warn(
      {classes: this.#view.applicable.map((c) => c.metadata.name), file: this.#file, savedAt: persisted.savedAt},
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
    await Promise.all([this.#classes.stop(), this.#node.stop()])
    await this.#reading
    await this.#persisting
  }

  /** A (re)list: whole objects, specs included. */
  #takeList(): void {
    this.#specs = new Map([...this.#classes.cache.values()].filter((c) => c.spec !== undefined).map((c) => [c.metadata.name, c]))
  }

  /**
   * A class edited (its generation moved): its spec, read once. A class deleted meanwhile is left to its
   * delete event; a failed read is tried again after a back-off (2 s doubling to 30 s), the previous spec
   * staying in use meanwhile.
   */
  #readSpec(item: ClassItem, retry?: RetryTimer): void {
    const {name, uid} = item.metadata
    this.#reading = this.#reading.then(async () => {
      const watched = this.#classes.cache.get(name)
      if (this.#stopped || watched?.metadata.uid !== uid || this.#specs.get(name)?.metadata.generation === watched.metadata.generation) return
      try {
        const object = deviceClassCodec.toItem(await this.options.client.request('GET', `${deviceClassesPath}/${encodeURIComponent(name)}`))
        if (object === undefined || object.metadata.uid !== uid || this.#classes.cache.get(name)?.metadata.uid !== uid) return
        this.#specs.set(name, object)
        this.#refresh()
      } catch (error) {
        if (isStatus(error, 'NotFound') || this.#stopped) return
        const again = retry ?? new RetryTimer({backoff: readRetry})
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
    const node = this.#node.cache.get(this.options.nodeName)
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
    this.#persist()
    if (notify) this.#listener?.(view)
  }

  #setView(view: ClassView): boolean {
    const key = keyOf(view)
    if (key === this.#viewKey) return false
    this.#view = view
    this.#viewKey = key
    return true
  }

  /** Serialised, so that the file always ends with the latest view. */
  #persist(): void {
    const state: ClassState = {classes: [...this.#lastValid.values()], node: this.options.nodeName, nodeLabels: this.#labels, savedAt: new Date().toISOString(), version: 1}
    this.#persisting = this.#persisting
      .then(async () => {
        await mkdir(this.options.stateDir, {mode: 0o700, recursive: true})
        await writeFileAtomic(this.#file, JSON.stringify(state, null, 2) + '\n', {mode: 0o600})
      })
      .catch((error: unknown) => {
        this.options.onPersistError?.(error)
        this.#log.error({err: errorMessage(error), file: this.#file}, 'cannot persist the DeviceClasses; a start without the API server would use older ones')
      })
  }

  /** The persisted classes, each validated again; an unreadable file is reported and treated as absent. */
  async #readState(): Promise<ClassState | undefined> {
    let text: string
    try {
      text = await readFile(this.#file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#log.warn({err: errorMessage(error), file: this.#file}, 'cannot read the persisted DeviceClasses')
      return undefined
    }
    try {
      const state = JSON.parse(text) as Partial<ClassState>
      if (state.version !== 1 || !Array.isArray(state.classes)) throw new Error('not a version 1 class state')
      if (state.node !== this.options.nodeName) throw new Error(`it was written for node ${state.node}, not ${this.options.nodeName}`)
      const classes: DeviceClass[] = []
      for (const item of state.classes) {
        const listed = listedClass(item)
        if (listed.ok) classes.push(listed.deviceClass)
        else this.#log.warn({class: listed.name, file: this.#file, problem: listed.message}, 'a persisted DeviceClass is invalid; skipped')
      }
      return {...(state as ClassState), classes, nodeLabels: {...state.nodeLabels}}
    } catch (error) {
      this.#log.warn({err: errorMessage(error), file: this.#file}, 'the persisted DeviceClasses cannot be used; ignored')
      return undefined
    }
  }
}

function keyOf(view: ClassView): string {
  return JSON.stringify(view)
}
