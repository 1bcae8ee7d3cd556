import type {ClassMembers} from '../devices/class-members.js'
import type {ClassStore} from '../devices/class-store.js'
import type {ClassView} from '../devices/class-view.js'
import type {OwnedDevices} from '../devices/owned-devices.js'
import {errorMessage} from '../errors.js'
import type {EventBatcher} from '../event-batcher.js'
import type {NativeMemoryTrim} from '../native-memory.js'
import type {Logger} from '../observe/logger.js'
import type {Signal} from '../signal.js'
import type {SourceSupervisor} from '../source-supervisor.js'
import type {AgentMetrics} from './agent-metrics.js'
import type {ClaimDriver, DevicePlugins, Readiness, Stoppable} from './agent-parts.js'
import type {ChangeSources, DeviceChange} from './change-sources.js'
import type {GrantReadiness} from './grant-readiness.js'
import type {GrantRecord} from './grant-record.js'
import type {NodeReconciler} from './node-reconciler.js'

export interface NodeAgentOptions {
  readonly nodeName: string
  /** The node's classes, followed live (started by start()). */
  readonly classStore: Pick<ClassStore, 'onChange' | 'start' | 'stop' | 'view'>
  /** What can change a container's access (started by start()); their changes arrive on `changes`. */
  readonly sources: Pick<ChangeSources, 'follow' | 'notReady' | 'start' | 'stop'>
  /** Every event that can change who may hold what: pods and namespaces (ChangeSources), the DRA driver's claims, status retries. */
  readonly changes: Signal<string>
  /** containerd's containers and tasks: which containers run. */
  readonly containerChanges: Signal<string>
  /** Class devices came, went or changed (ChangeSources): given to the device lane, then to a batch. */
  readonly deviceChanges: Signal<DeviceChange>
  /** The batches' reconciler, whose device lane applies device changes ahead of the batch queue. */
  readonly lane: Pick<NodeReconciler, 'admissionChanged' | 'applyDevices'>
  /** Group commit of those events; its batches run batchProcess(). */
  readonly batcher: Pick<EventBatcher<string>, 'add' | 'stop'>
  /** The devices of the node's classes, which the agent keeps in step with class changes. */
  readonly members: Pick<ClassMembers, 'remember' | 'setClasses'>
  /** The classes' kubelet device plugins over the same members (started by start()). */
  readonly plugins: DevicePlugins
  /** The DRA driver of the classes with allocation DRA (started by start()); undefined leaves them unserved. */
  readonly dra?: ClaimDriver
  /**
   * Run once the records are loaded and the devices scanned, before anything slow (the API server, kubelet):
   * numbers whose device went while the agent was away taken from containers (start-sweep.ts).
   */
  readonly startSweep?: () => Promise<unknown>
  /** What the agent granted each container (under --state-dir; loaded by start()). */
  readonly grants: Pick<GrantRecord, 'load'>
  /** Every device number that was a class device on this node (under --state-dir; loaded by start()). */
  readonly owned: Pick<OwnedDevices, 'devices' | 'load'>
  /** Whether grants work (fed by the batches). */
  readonly grantHealth: Pick<GrantReadiness, 'problem'>
  /** Owns the restarts of the agent's sources and says which are down (/readyz). */
  readonly supervisor: Pick<SourceSupervisor, 'status'>
  /** Stopped after the batcher and the device lane, in this order: what they write (the grant record, pod Events, memory trim, class status). */
  readonly afterBatches: readonly Stoppable[]
  readonly logger: Logger
  readonly metrics: Pick<AgentMetrics, 'errors' | 'invalidClasses'>
}

export interface BatchParts {
  readonly sources: Pick<ChangeSources, 'listed'>
  readonly reconciler: Pick<NodeReconciler, 'reconcile'>
  readonly metrics: Pick<AgentMetrics, 'batchSeconds' | 'batchSize'>
  readonly trim: Pick<NativeMemoryTrim, 'afterWork'>
  readonly dra?: Pick<ClaimDriver, 'flush'>
}

/** What one batch of events does: the node reconciled (once its pods are listed), then the DRA driver's writes. */
export function batchProcess({dra, metrics, reconciler, sources, trim}: BatchParts): (events: string[]) => Promise<void> {
  return async (events) => {
    try {
      // The first lists start a batch of their own: an empty pod list would read as "nobody asks for anything".
      if (!sources.listed) return
      const started = performance.now()
      metrics.batchSize.observe(events.length)
      await reconciler.reconcile()
      metrics.batchSeconds.observe((performance.now() - started) / 1000)
      trim.afterWork()
    } finally {
      // The DRA pool, health and claim statuses (API writes, a 250 ms budget) once the containers have their
      // devices (50 ms): written meanwhile, they would take the event loop from the batch.
      dra?.flush()
    }
  }
}

/**
 * The node agent: keeps every running container's device access in step with the DeviceClasses it asked
 * for, as devices come and go and containers start and stop. Whatever can change that (ChangeSources, the
 * classes, the DRA driver's claims) feeds one group-commit batcher, and each batch reconciles the whole node
 * (NodeReconciler). The classes' kubelet device plugins run in the same process over the same class members.
 * The command builds every part; the agent orders their start and stop and answers /readyz.
 */
export class NodeAgent {
  readonly #log: Logger
  #classNames = ''
  /** DRA classes that no driver serves (the agent runs without --dra), said once per set. */
  #unservedDra = ''
  #unlisten: Array<() => void> = []
  /** The device lane's runs not settled yet: stop() waits for them with the batches. */
  readonly #lanes = new Set<Promise<unknown>>()

  constructor(readonly options: NodeAgentOptions) {
    this.#log = options.logger
  }

  /** Ready while every source is up, the servers are registered and grants work; else the reason lists what is not. */
  status(): Readiness {
    const {dra, grantHealth, plugins, sources, supervisor} = this.options
    const waiting = sources.notReady()
    if (waiting !== undefined) return {ready: false, reason: waiting}
    const parts = [supervisor.status(), plugins.status(), ...(dra === undefined ? [] : [dra.status()])]
    const grants = grantHealth.problem()
    if (grants !== undefined) parts.unshift({ready: false, reason: grants})
    const notReady = parts.filter((p) => !p.ready)
    if (notReady.length > 0) return {ready: false, reason: notReady.map((p) => p.reason).join('; ')}
    return {ready: true, reason: parts.map((p) => p.reason).join('; ')}
  }

  /**
   * The records and the devices first, and the start sweep (a number whose device went while the agent was
   * away must not stay open until the API server answers), then the classes (from the cluster, or persisted
   * when it does not answer), the plugins, DRA, pods and containerd.
   */
  async start(signal: AbortSignal): Promise<void> {
    const {batcher, classStore, grants, lane, metrics, plugins} = this.options
    this.#unlisten = [
      this.options.changes.listen((what) => {
        lane.admissionChanged()
        batcher.add(what)
      }),
      this.options.containerChanges.listen((what) => batcher.add(what)),
      this.options.deviceChanges.listen(({classes, what}) => {
        const run = lane.applyDevices(classes).catch((error: unknown) => this.#log.error({err: errorMessage(error)}, 'device lane failed; the batch that follows applies the change'))
        this.#lanes.add(run)
        void run.finally(() => this.#lanes.delete(run))
        batcher.add(what)
      }),
    ]
    classStore.onChange((view) => {
      lane.admissionChanged()
      this.#setClasses(view)
      batcher.add('classes changed')
    })
    const problem = await grants.load()
    if (problem !== undefined) {
      metrics.errors.inc({kind: 'state'})
      this.#log.warn({err: problem}, 'the record of granted devices cannot be used; only devices seen from now on are taken back when they go')
    }
    const ownedProblem = await this.options.owned.load()
    if (ownedProblem !== undefined) {
      metrics.errors.inc({kind: 'state'})
      this.#log.warn({err: ownedProblem}, "the record of the node's class device numbers cannot be used; only numbers seen from now on are taken back when their device goes")
    }
    // Before the first scan: a number whose device went while the agent was away is still the agent's.
    this.options.members.remember(this.options.owned.devices())
    // The devices before the classes, and the start sweep between: it compares each owned number's recorded
    // device with the one there now, and a device placed in a class is recorded as its number's.
    await this.options.sources.start(signal)
    await this.options.startSweep?.()
    await classStore.start(signal)
    this.#setClasses(classStore.view)
    await plugins.start()
    await this.options.dra?.start(signal)
    this.options.sources.follow(signal)
    batcher.add('start')
  }

  /** Stops watching; granted access stays in place (running pods keep their devices). */
  async stop(): Promise<void> {
    await this.options.sources.stop()
    await this.options.classStore.stop()
    for (const unlisten of this.#unlisten) unlisten()
    await this.options.batcher.stop()
    await Promise.all(this.#lanes)
    for (const part of this.options.afterBatches) await part.stop()
    await this.options.plugins.stop()
    await this.options.dra?.stop()
  }

  /** Every present device is placed in the new classes, and the plugins follow. */
  #setClasses(view: ClassView): void {
    this.options.metrics.invalidClasses.set(view.invalid.length)
    this.options.members.setClasses(view.applicable)
    this.options.plugins.classesChanged()
    this.options.dra?.classesChanged()
    const unserved = this.options.dra === undefined ? view.applicable.filter((c) => c.spec.allocation === 'DRA').map((c) => c.metadata.name) : []
    if (unserved.join(',') !== this.#unservedDra && unserved.length > 0) {
      this.#log.warn({classes: unserved}, 'these classes have allocation DRA, which only the DRA driver serves; start the agent with --dra')
    }
    this.#unservedDra = unserved.join(',')
    const names = view.applicable.map((c) => c.metadata.name)
    if (names.join(',') === this.#classNames) return
    this.#classNames = names.join(',')
    if (names.length === 0) this.#log.warn({}, `no DeviceClass applies to node ${this.options.nodeName}; waiting for one (kubectl apply, or --class-file)`)
    else this.#log.info({classes: names}, 'classes of this node')
  }
}
