import {draClassName, resourceNameOf} from '../devices/resource-names.js'
import {deviceClassApiVersion, type DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import {MetadataInformer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import {followPolicy, SourceSupervisor, type SourceReport} from '../source-supervisor.js'
import {classAttribute, draDriver} from './resource-slices.js'

const suffix = `.${draDriver}`

/** The devices.nfdctl.io class behind a resource.k8s.io DeviceClass name; undefined for another driver's class. */
export function className(draClass: string): string | undefined {
  return draClass.endsWith(suffix) && draClass.length > suffix.length ? draClass.slice(0, -suffix.length) : undefined
}

/** Says which devices.nfdctl.io class a resource.k8s.io DeviceClass stands for. */
export const classLabel = `${draDriver}/class`

/** The CEL selector of a class: this driver's devices that carry the class's attribute. */
export function classSelector(name: string): string {
  return `device.driver == "${draDriver}" && "${classAttribute(name)}" in device.attributes["${draDriver}"]`
}

export interface DraDeviceClass {
  readonly apiVersion: 'resource.k8s.io/v1'
  readonly kind: 'DeviceClass'
  readonly metadata: {
    readonly name: string
    readonly labels: Readonly<Record<string, string>>
    readonly ownerReferences?: ReadonlyArray<{readonly apiVersion: string; readonly kind: string; readonly name: string; readonly uid: string}>
  }
  readonly spec: {
    readonly selectors: ReadonlyArray<{readonly cel: {readonly expression: string}}>
    /** The limit that asks for the class: the scheduler allocates it from the slices, kubelet prepares it here. */
    readonly extendedResourceName: string
  }
}

/**
 * Pure: the resource.k8s.io DeviceClass of a DRA class, the same from every node (so that agents applying
 * it never undo each other), owned by the devices.nfdctl.io class so that it goes when that class goes. It
 * names the class's extended resource devices.nfdctl.io/<class>, so that a pod asking by limit (as it did
 * of the class's device plugin) is served from the same slices as a claim (KEP-5004, GA in 1.37).
 */
export function draDeviceClassOf(deviceClass: DeviceClass): DraDeviceClass {
  const {name, uid} = deviceClass.metadata
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'DeviceClass',
    metadata: {
      labels: {'app.kubernetes.io/managed-by': 'nfdctl', [classLabel]: name},
      name: draClassName(name),
      ownerReferences: uid === undefined ? undefined : [{apiVersion: deviceClassApiVersion, kind: 'DeviceClass', name, uid}],
    },
    spec: {extendedResourceName: resourceNameOf(name), selectors: [{cel: {expression: classSelector(name)}}]},
  }
}

const draClassesPath = '/apis/resource.k8s.io/v1/deviceclasses'
/** A second, every time: the wait after a deletion is not a failure growing longer. */
const reapplyDelay = {baseMs: 1000, maxMs: 1000}

export interface DraDeviceClassesOptions {
  readonly client: KubeClient
  readonly logger: Logger
  /** Counts a failed write. */
  readonly onError: () => void
  /**
   * Whether the classes handed to sync() are the cluster's whole list (not the ones persisted for a start
   * without the API server): only then are DeviceClasses of other classes deleted.
   */
  readonly complete?: () => boolean
  /**
   * Retries a failed sync with the shared back-off and shows it on /readyz while it fails; never gives up on
   * it (only the API server can bring it back). Default: one of its own.
   */
  readonly supervisor?: SourceSupervisor
  /** The API server started or stopped dropping the DeviceClasses' extendedResourceName (see extendedResourceNameDropped). */
  readonly onDroppedChanged?: (dropped: boolean) => void
}

/** Pure: whether what the API server stored of an applied DeviceClass lacks the extendedResourceName it was sent (DRAExtendedResource off). */
export function extendedResourceNameDropped(sent: DraDeviceClass, stored: unknown): boolean {
  const spec = (stored as {spec?: {extendedResourceName?: unknown}} | undefined)?.spec
  return spec !== undefined && spec.extendedResourceName !== sent.spec.extendedResourceName
}

/**
 * Keeps a resource.k8s.io DeviceClass for each DRA class of the cluster (all of them, not only this node's:
 * every agent applies the same objects with the same field manager, so they agree), and deletes the ones
 * it made for classes that are gone or no longer DRA. Writes only what changed since the last success; the
 * DeviceClasses are watched (start()), so one deleted by anyone else is applied again.
 */
export class DraDeviceClasses {
  readonly #applied = new Map<string, string>()
  #queue: Promise<void> = Promise.resolve()
  #listed = false
  #last: readonly DeviceClass[] | undefined
  readonly #informer: MetadataInformer
  readonly #reapply = new RetryTimer({backoff: reapplyDelay})
  readonly #health: SourceReport
  #stopped = false
  #dropped = false

  constructor(readonly options: DraDeviceClassesOptions) {
    this.#health = (options.supervisor ?? new SourceSupervisor({logger: options.logger})).restartable('resource.k8s.io DeviceClasses', () => this.#run(this.#last ?? []), followPolicy)
    this.#informer = new MetadataInformer({
      client: options.client,
      logger: options.logger,
      onDeleted: (object) => {
        if (!this.#applied.delete(object.name) || this.#last === undefined) return
        options.logger.info({deviceClass: object.name}, `resource.k8s.io DeviceClass ${object.name} was deleted; applying it again if its class is still DRA`)
        // A second later: deleted with its class (garbage collection), the class's own deletion arrives meanwhile.
        this.#reapply.failed(() => void this.sync(this.#last ?? []))
      },
      pageSize: 500,
      resource: {group: 'resource.k8s.io', namespaced: false, plural: 'deviceclasses', version: 'v1'},
    })
  }

  /** Watches the DeviceClasses (in the background: a cluster without resource.k8s.io/v1 only loses the watch). */
  start(signal: AbortSignal): void {
    this.#informer.start(signal).catch(() => {})
  }

  async stop(): Promise<void> {
    this.#stopped = true
    this.#reapply.stop()
    await this.#informer.stop()
    await this.#queue
  }

  /** Whether the API server dropped the extendedResourceName of the last DeviceClass applied. */
  get extendedResourceNameDropped(): boolean {
    return this.#dropped
  }

  /** Brings the cluster's resource.k8s.io DeviceClasses in step with these classes (the cluster's valid ones). */
  sync(classes: readonly DeviceClass[]): Promise<void> {
    this.#last = classes
    return this.#run(classes).then(
      () => this.#health.up(),
      (error: unknown) => this.#health.failed(error),
    )
  }

  /** One sync after the ones queued; rejects when it fails (the supervisor then retries the latest classes). */
  #run(classes: readonly DeviceClass[]): Promise<void> {
    const run = this.#queue.then(() => (this.#stopped ? undefined : this.#sync(classes)))
    // Logged by the supervisor, once per outage.
    this.#queue = run.catch(() => {
      this.options.onError()
      this.#applied.clear()
    })
    return run
  }

  async #sync(classes: readonly DeviceClass[]): Promise<void> {
    const {client, logger} = this.options
    const wanted = new Map(classes.filter((c) => c.spec.allocation === 'DRA' && c.metadata.uid !== undefined).map((c) => [draClassName(c.metadata.name), draDeviceClassOf(c)]))
    for (const [name, object] of wanted) {
      const key = JSON.stringify(object)
      if (this.#applied.get(name) === key) continue
      const stored = await client.request<unknown>('PATCH', `${draClassesPath}/${encodeURIComponent(name)}`, {
        body: object,
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: 'nfdctl-agent', force: true},
      })
      this.#droppedNow(extendedResourceNameDropped(object, stored))
      if (!this.#applied.has(name)) logger.info({deviceClass: name}, `resource.k8s.io DeviceClass ${name} applied`)
      this.#applied.set(name, key)
    }
    // Nothing is deleted on a partial view: another node's class would lose its DeviceClass.
    if (this.options.complete?.() === false) return
    // The first sync also finds classes made before this agent started.
    const made = this.#listed ? [...this.#applied.keys()] : await this.#listMade()
    this.#listed = true
    for (const name of made) {
      if (wanted.has(name)) continue
      this.#applied.delete(name)
      // One that cannot be deleted (an admission policy's word, say) is said and left; the others still go.
      const deleted = await client.request('DELETE', `${draClassesPath}/${encodeURIComponent(name)}`).then(
        () => true,
        (error: unknown) => {
          if (isStatus(error, 'NotFound')) return false
          this.options.onError()
          logger.warn({deviceClass: name, err: errorMessage(error)}, `cannot delete resource.k8s.io DeviceClass ${name}, whose class is gone or no longer DRA`)
          return false
        },
      )
      if (deleted) logger.info({deviceClass: name}, `resource.k8s.io DeviceClass ${name} deleted: its class is gone or no longer DRA`)
    }
  }

  /** Said once per change: a field the API server drops is dropped from every DeviceClass alike. */
  #droppedNow(dropped: boolean): void {
    if (dropped === this.#dropped) return
    this.#dropped = dropped
    if (dropped) {
      this.options.logger.warn(
        {},
        "the API server drops the extendedResourceName of resource.k8s.io DeviceClasses (the DRAExtendedResource feature gate is off): pods that ask for a DRA class by resource limit are not served; the classes' status says so",
      )
    } else this.options.logger.info({}, 'the API server keeps the extendedResourceName of resource.k8s.io DeviceClasses: pods may ask for DRA classes by resource limit')
    this.options.onDroppedChanged?.(dropped)
  }

  /** The DeviceClasses the agents made: this driver's names, nfdctl's labels (another's object is never deleted). */
  async #listMade(): Promise<string[]> {
    const list = await this.options.client.request<{items?: Array<{metadata: {name: string}}>}>('GET', draClassesPath, {
      query: {labelSelector: `${classLabel},app.kubernetes.io/managed-by=nfdctl`},
    })
    return (list.items ?? []).map((i) => i.metadata.name).filter((name) => className(name) !== undefined)
  }
}
