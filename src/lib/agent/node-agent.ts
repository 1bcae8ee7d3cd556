import type {DeviceSource} from '../devices/device-watcher.js'
import type {ClassMembers} from '../devices/class-members.js'
import type {OwnedDevices} from '../devices/owned-devices.js'
import {errorMessage} from '../errors.js'
import {EventBatcher} from '../event-batcher.js'
import type {KubeClient} from '../kube/kube-client.js'
import {NativeMemoryTrim} from '../memory.js'
import type {Logger} from '../observe/logger.js'
import type {DraDriver} from '../dra/dra-driver.js'
import type {PluginSet} from '../plugins/plugin-set.js'
import type {ContainerdClient} from '../runtime/containerd-client.js'
import type {CgroupMode} from '../runtime/device-cgroup.js'
import type {SourceSupervisor} from '../source-supervisor.js'
import type {AgentMetrics} from './agent-metrics.js'
import {ChangeSources} from './change-sources.js'
import type {ClassStore, ClassView} from './class-store.js'
import {ContainerReconciler} from './container-reconciler.js'
import {afterBatch, grantProblem, healthyGrants, type GrantHealth} from './grant-health.js'
import type {GrantRecord} from './grant-record.js'
import {NodeReconciler} from './node-reconciler.js'
import {PodEvents} from './pod-events.js'
import {RefusalNotices} from './refusal-notices.js'
import {StatusReporter} from './status-reporter.js'

export interface NodeAgentOptions {
  readonly nodeName: string
  readonly client: KubeClient
  readonly containerd: ContainerdClient
  /** The node's classes, followed live (started by start()). */
  readonly classStore: ClassStore
  /** The devices of the node's classes, which the agent keeps in step with uevents and class changes. */
  readonly members: ClassMembers
  /** The classes' kubelet device plugins over the same members (started by start()). */
  readonly plugins: PluginSet
  /** The DRA driver of the classes with allocation DRA (started by start()); undefined leaves them unserved. */
  readonly dra?: DraDriver
  /** Where devices come from (a SysfsScanner). */
  readonly devices: DeviceSource
  readonly podResourcesSocket: string
  /** An optional minimum delay before a batch (--batch-quiet; 0: none) and its bound (--batch-max-wait). */
  readonly quietMs: number
  readonly maxWaitMs: number
  readonly workers: number
  readonly cgroupMode: CgroupMode
  /** What the agent granted each container (under --state-dir; loaded by start()). */
  readonly grants: GrantRecord
  /** Every device number that was a class device on this node (under --state-dir; loaded by start()). */
  readonly owned: OwnedDevices
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** Owns the restarts of the agent's sources and says which are down (/readyz). */
  readonly supervisor: SourceSupervisor
}

/**
 * The node agent: keeps every running container's device access in step with the DeviceClasses it asked
 * for, as devices come and go and containers start and stop. Whatever can change that (ChangeSources, the
 * classes) feeds one group-commit batcher, and each batch reconciles the whole node (NodeReconciler). The
 * classes' kubelet device plugins run in the same process over the same class members.
 */
export class NodeAgent {
  readonly #log: Logger
  readonly #sources: ChangeSources
  readonly #batcher: EventBatcher<string>
  readonly #events: PodEvents
  readonly #status: StatusReporter
  readonly #trim: NativeMemoryTrim
  #classNames = ''
  /** DRA classes that no driver serves (the agent runs without --dra), said once per set. */
  #unservedDra = ''
  #grants: GrantHealth = healthyGrants

  constructor(readonly options: NodeAgentOptions) {
    const {client, logger, metrics, nodeName} = options
    this.#log = logger
    const changed = (what: string): void => this.#batcher.add(what)
    // Containers skipped in the running batch (their process gone or not their own): failures for readiness.
    let skipped: {count: number; last?: string} = {count: 0}
    this.#sources = new ChangeSources({...options, onChange: changed})
    this.#events = new PodEvents({client, logger, nodeName, onError: () => metrics.errors.inc({kind: 'events'})})
    this.#status = new StatusReporter({client, logger, metrics, nodeName, retry: () => changed('status retry')})
    this.#trim = new NativeMemoryTrim((returnedMb, rssMb) => logger.debug({returnedMb, rssMb}, 'free native memory returned to the kernel'))
    const reconciler = new NodeReconciler({
      claimed: options.dra === undefined ? undefined : (container) => options.dra!.claimed(container),
      classes: () => options.classStore.view,
      containers: () => this.#sources.containers(),
      logger,
      members: options.members,
      metrics,
      namespaceLabels: (name) => this.#sources.namespaceLabels(name),
      nodeName,
      notices: new RefusalNotices({events: this.#events, logger, metrics}),
      podResourcesSocket: options.podResourcesSocket,
      pods: () => this.#sources.pods(),
      outcome: (outcome) => {
        const gone = skipped
        skipped = {count: 0}
        const failed = outcome.failed + gone.count
        this.#setGrants(afterBatch(this.#grants, {failed, lastError: outcome.lastError ?? gone.last, succeeded: outcome.succeeded - gone.count}))
      },
      reconciler: new ContainerReconciler({
        cgroupMode: options.cgroupMode,
        grants: options.grants,
        logger,
        metrics,
        onSkipped: (error) => (skipped = {count: skipped.count + 1, last: error.message}),
      }),
      status: this.#status,
      workers: options.workers,
    })
    this.#batcher = new EventBatcher<string>({
      maxWaitMs: options.maxWaitMs,
      onError: (error) => this.#log.error({err: errorMessage(error)}, 'batch failed; the next event retries'),
      process: async (events) => {
        try {
          // The first lists start a batch of their own: an empty pod list would read as "nobody asks for anything".
          if (!this.#sources.listed) return
          const started = performance.now()
          metrics.batchSize.observe(events.length)
          await reconciler.reconcile()
          metrics.batchSeconds.observe((performance.now() - started) / 1000)
          this.#trim.afterWork()
        } finally {
          // The DRA pool, health and claim statuses (API writes, a 250 ms budget) once the containers have their
          // devices (50 ms): written meanwhile, they would take the event loop from the batch.
          options.dra?.flush()
        }
      },
      quietMs: options.quietMs,
    })
  }

  /** Ready while every source is up, the servers are registered and grants work; else the reason lists what is not. */
  status(): {ready: boolean; reason: string} {
    const waiting = this.#sources.notReady()
    if (waiting !== undefined) return {ready: false, reason: waiting}
    const parts = [this.options.supervisor.status(), this.options.plugins.status(), ...(this.options.dra === undefined ? [] : [this.options.dra.status()])]
    const grants = grantProblem(this.#grants)
    if (grants !== undefined) parts.unshift({ready: false, reason: grants})
    const notReady = parts.filter((p) => !p.ready)
    if (notReady.length > 0) return {ready: false, reason: notReady.map((p) => p.reason).join('; ')}
    return {ready: true, reason: parts.map((p) => p.reason).join('; ')}
  }

  /** Classes first (from the cluster, or persisted when it does not answer), then devices, the plugins, pods and containerd. */
  async start(signal: AbortSignal): Promise<void> {
    const {classStore, grants, metrics, plugins} = this.options
    classStore.onChange((view) => {
      this.#setClasses(view)
      this.#batcher.add('classes changed')
    })
    await classStore.start(signal)
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
    this.#setClasses(classStore.view)
    await this.#sources.start(signal)
    await plugins.start()
    await this.options.dra?.start(signal)
    this.#sources.follow(signal)
    this.#batcher.add('start')
  }

  /** Something outside the agent's sources changed what a container may hold (a claim prepared): a batch follows. */
  changed(what: string): void {
    this.#batcher.add(what)
  }

  /** Stops watching; granted access stays in place (running pods keep their devices). */
  async stop(): Promise<void> {
    await this.#sources.stop()
    await this.options.classStore.stop()
    await this.#batcher.stop()
    await this.#events.stop()
    this.#trim.stop()
    await this.#status.stop()
    await this.options.plugins.stop()
    await this.options.dra?.stop()
  }

  /** Said once when grants start and stop failing. */
  #setGrants(health: GrantHealth): void {
    const before = grantProblem(this.#grants)
    this.#grants = health
    const now = grantProblem(health)
    if (now !== undefined && before === undefined) this.#log.error({err: health.lastError, failingBatches: health.failingBatches}, 'grants keep failing; /readyz says not ready until one succeeds')
    if (now === undefined && before !== undefined) this.#log.info({}, 'grants work again')
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
