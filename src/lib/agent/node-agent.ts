import {setTimeout as sleep} from 'node:timers/promises'

import type {Registry} from 'prom-client'

import {DeviceWatcher} from '../devices/device-watcher.js'
import {SysfsScanner} from '../devices/sysfs-scanner.js'
import type {Device, DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {Informer, MetadataInformer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {Logger} from '../observe/logger.js'
import {resourceNameOf} from '../plugins/class-allocation.js'
import {createPluginMetrics} from '../plugins/plugin-metrics.js'
import {PluginSet} from '../plugins/plugin-set.js'
import {allocatedDevices, listPodResources} from '../plugins/pod-resources.js'
import type {ContainerdClient, RuntimeContainer} from '../runtime/containerd-client.js'
import {hasDevicePrograms} from '../runtime/device-bpf.js'
import {ContainerGoneError, ContainerHandle} from '../runtime/container-handle.js'
import type {CgroupMode} from '../runtime/device-cgroup.js'
import {ociDeviceRules, ruleDeviceId, rulesWithout} from '../runtime/device-program.js'
import {releaseFreeNativeMemory} from '../sys/libc.js'
import {applyAccess, currentAccess, UnsupportedProgramError, type HeldAccess} from './access-applier.js'
import {decideAccess, holderKey, limitHoldersOf, type PolicyDecision} from './access-policy.js'
import type {AgentMetrics} from './agent-metrics.js'
import {
  containerRequests, criLabels, diffAccess, podCodec, requestKey, requestOfContainer, ruleOf, wantedAccess, type ContainerRequest, type NodePod,
} from './container-access.js'
import {EventBatcher} from './event-batcher.js'
import {deviceOfGrant, grantsAfter, grantsBefore, type GrantRecord} from './grant-record.js'
import {type ClassProblem, type ClassStore, type ClassView} from './class-store.js'
import {PodEvents} from './pod-events.js'
import {nodeClassStatus, StatusWriter, type ClassReport, type NodeClassStatus} from './status-writer.js'

export interface NodeAgentOptions {
  readonly nodeName: string
  readonly client: KubeClient
  readonly containerd: ContainerdClient
  /** The node's classes, followed live (not started yet: start() starts it). */
  readonly classStore: ClassStore
  readonly pluginDir: string
  readonly podResourcesSocket: string
  readonly cdiDir?: string
  readonly quietMs: number
  readonly maxWaitMs: number
  /** A lone event is processed at once (default); off, every event waits for the quiet window. */
  readonly leadingEdge?: boolean
  readonly workers: number
  /** Which device control to change: auto decides per container (v2 when its cgroup2 directory has a device program). */
  readonly cgroupMode: CgroupMode
  readonly logger: Logger
  readonly registry: Registry
  readonly metrics: AgentMetrics
  /** What the agent granted each container (under --state-dir; not loaded yet: start() loads it). */
  readonly grants: GrantRecord
}

const podsResource = {group: '', namespaced: true, plural: 'pods', version: 'v1'}
const namespacesResource = {group: '', namespaced: false, plural: 'namespaces', version: 'v1'}
/** After a burst's last batch, once V8's memory reducer (about 20 s after) has freed the buffers it held. */
const nativeTrimDelayMs = 30_000

/**
 * The node agent: keeps every running container's device access in step with the DeviceClasses it asked
 * for, as devices come and go and containers start and stop. Sources are kernel uevents, containerd's event
 * stream (re-listed on every reconnect: it has no replay) and a node-scoped pod informer; their events are
 * batched on timers, and a batch reconciles every container: wanted access (its requests, the classes'
 * devices, kubelet's allocations) against what its cgroup has, applying only the difference. The kubelet
 * device plugins of the classes are served by the same process.
 */
export class NodeAgent {
  readonly #log: Logger
  readonly #metrics: AgentMetrics
  readonly #plugins: PluginSet
  readonly #scanner = new SysfsScanner({})
  readonly #watcher: DeviceWatcher
  readonly #batcher: EventBatcher<string>
  #trimTimer: NodeJS.Timeout | undefined
  readonly #pods: Informer<NodePod>
  /** Namespace labels, for the classes' annotationAccess.namespaceSelector. */
  readonly #namespaces: MetadataInformer
  readonly #events: PodEvents
  /** The annotation grants the access policy admitted in the last batch (holderKey). */
  #annotationHolders: ReadonlySet<string> = new Set()
  /** The refusals already told (Event, log, metric), by holderKey and reason: told once while they last. */
  readonly #told = new Set<string>()
  #classes = new Map<string, DeviceClass>()
  #invalid: readonly ClassProblem[] = []
  /** Every device present now, in a class or not: a class change places them all again. */
  readonly #present = new Map<string, Device>()
  /**
   * Every class device seen since start, present or not: in a container that asks for classes, a rule naming
   * one is ours to manage. (A device gone before the start is known from the grant record alone.)
   */
  readonly #known = new Map<string, Device>()
  /** The grant record failed to write (said once until it works again). */
  #recordFailing = false
  readonly #unsupported = new Set<string>()
  /** Containers whose process was gone (or not theirs) when looked at: told once. */
  readonly #gone = new Set<string>()
  readonly #status: StatusWriter
  #statusOk = true
  /** Failed status writes in a row: the retry waits 1 s, 2 s, 4 s … up to 30 s (the API server may be away for long). */
  #statusFailures = 0
  #statusRetry: NodeJS.Timeout | undefined
  /**
   * Containers that may hold class devices the agent gave: reconciled even when they no longer ask (an
   * annotation edited away), so that what they were given is taken back. Undefined until the first batch,
   * which looks at every container: one that stopped asking while the agent was away is found there.
   */
  #mayHold: Set<string> | undefined
  #unsubscribe: (() => void) | undefined
  #endSubscription: (() => void) | undefined
  #containerdUp: boolean | undefined
  #stopped = false
  #containerdLoop: Promise<void> | undefined

  constructor(readonly options: NodeAgentOptions) {
    this.#log = options.logger
    this.#metrics = options.metrics
    this.#status = new StatusWriter(options.client, options.nodeName)
    this.#plugins = new PluginSet({
      cdiDir: options.cdiDir, classes: [], logger: options.logger, metrics: createPluginMetrics(options.registry),
      pluginDir: options.pluginDir, readAttribute: this.#scanner.readAttribute,
    })
    this.#batcher = new EventBatcher<string>({
      leadingEdge: options.leadingEdge,
      maxWaitMs: options.maxWaitMs,
      onError: (error) => this.#log.error({err: errorMessage(error)}, 'batch failed; the next event retries'),
      // No explicit collection after a batch (as gc run makes after a sweep): V8's memory reducer runs
      // once the agent goes quiet and shrinks the heap, which a plain gc() did not (same RSS, more CPU).
      process: async (events) => {
        await this.#reconcile(events)
        this.#trimWhenQuiet()
      },
      quietMs: options.quietMs,
    })
    this.#watcher = new DeviceWatcher({
      coalesceChanges: true,
      logger: options.logger,
      onEvent: ({action, device}) => {
        this.#deviceEvent(action, device)
        this.#batcher.add(`device ${action} ${device.devName}`)
      },
      source: this.#scanner,
    })
    this.#pods = new Informer<NodePod>({
      client: options.client, fieldSelector: `spec.nodeName=${options.nodeName}`, logger: options.logger,
      onChanged: (pod, previous) => this.#podChanged(pod, previous), onDeleted: (pod) => this.#batcher.add(`pod ${pod.metadata.namespace}/${pod.metadata.name} deleted`),
      pageSize: 500, resource: podsResource,
    }, podCodec)
    this.#namespaces = new MetadataInformer({
      // Only a change of labels matters here (annotationAccess selects namespaces by them).
      client: options.client, logger: options.logger, onDeleted: (ns) => this.#batcher.add(`namespace ${ns.name} deleted`),
      onChanged: (ns, previous) => {
        if (ns === undefined || previous === undefined || JSON.stringify(ns.labels ?? {}) !== JSON.stringify(previous.labels ?? {})) this.#batcher.add(`namespace ${ns?.name ?? 'list'}`)
      },
      pageSize: 500, resource: namespacesResource,
    })
    this.#events = new PodEvents({client: options.client, logger: options.logger, nodeName: options.nodeName, onError: () => this.#metrics.errors.inc({kind: 'events'})})
  }

  status(): {ready: boolean; reason: string} {
    if (!this.#pods.synced) return {ready: false, reason: 'pods not listed yet'}
    if (!this.#namespaces.synced) return {ready: false, reason: 'namespaces not listed yet'}
    if (this.#containerdUp !== true) return {ready: false, reason: 'containerd not connected'}
    return this.#plugins.status()
  }

  /**
   * Classes first (from the cluster, or persisted when it does not answer), then devices, the plugins, pods
   * and containerd. The pod list may come later (the API server away at start): no container is changed
   * before it is there, since an empty list would read as "nobody asks for anything".
   */
  async start(signal: AbortSignal): Promise<void> {
    const store = this.options.classStore
    store.onChange((view) => {
      this.#setClasses(view)
      this.#batcher.add('classes changed')
    })
    await store.start(signal)
    const problem = await this.options.grants.load()
    if (problem !== undefined) {
      this.#metrics.errors.inc({kind: 'state'})
      this.#log.warn({err: problem}, 'the record of granted devices cannot be used; only devices seen from now on are taken back when they go')
    }
    this.#setClasses(store.view)
    await this.#watcher.start(signal, (devices) => {
      for (const device of devices) this.#deviceEvent('add', device)
    })
    await this.#plugins.start()
    this.#pods.start(signal).catch(() => {}) // rejects only when stopped before the first list
    this.#namespaces.start(signal).catch(() => {})
    this.#containerdLoop = this.#followContainerd(signal)
    this.#batcher.add('start')
  }

  /** Stops watching; granted access stays in place (running pods keep their devices). */
  async stop(): Promise<void> {
    this.#stopped = true
    // Cancelling the stream does not report an end: wake the loop ourselves.
    this.#unsubscribe?.()
    this.#endSubscription?.()
    await this.#watcher.stop()
    await this.options.classStore.stop()
    await this.#pods.stop()
    await this.#namespaces.stop()
    await this.#batcher.stop()
    await this.#events.stop()
    clearTimeout(this.#trimTimer)
    clearTimeout(this.#statusRetry)
    await this.#plugins.stop()
    await this.#containerdLoop
  }

  /**
   * A pod matters when what its containers ask for changes (or it comes or goes): kubelet's status updates
   * change nothing here, and a container that starts is heard from containerd.
   */
  #podChanged(pod: NodePod | undefined, previous: NodePod | undefined): void {
    if (pod === undefined) {
      this.#batcher.add('pods relisted')
      return
    }
    // By UID: a pod re-created under the same name is another pod.
    const asks = (p: NodePod): string => JSON.stringify(containerRequests(p).map((r) => [r.container, [...r.classes], r.annotationProblem]))
    if (previous?.metadata.uid === pod.metadata.uid && asks(previous) === asks(pod)) return
    this.#batcher.add(`pod ${pod.metadata.namespace}/${pod.metadata.name}`)
  }

  #deviceEvent(action: string, device: Device): void {
    if (action === 'remove') this.#present.delete(device.id)
    else this.#present.set(device.id, device)
    if (this.#plugins.deviceEvent(action, device).size > 0) this.#known.set(device.id, device)
  }

  #setClasses(view: ClassView): void {
    const before = [...this.#classes.keys()].join(',')
    this.#classes = new Map(view.applicable.map((c) => [c.metadata.name, c]))
    this.#invalid = view.invalid
    this.#metrics.invalidClasses.set(view.invalid.length)
    this.#plugins.setClasses(view.applicable, this.#present.values())
    for (const devices of this.#plugins.members().values()) for (const device of devices) this.#known.set(device.id, device)
    const now = [...this.#classes.keys()].join(',')
    if (now === before) return
    if (this.#classes.size === 0) this.#log.warn({}, `no DeviceClass applies to node ${this.options.nodeName}; waiting for one (kubectl apply, or --class-file)`)
    else this.#log.info({classes: [...this.#classes.keys()]}, 'classes of this node')
  }

  /** containerd's event stream, subscribed again with back-off whenever it ends; every (re)connect is a full reconcile. */
  async #followContainerd(signal: AbortSignal): Promise<void> {
    let failures = 0
    while (!signal.aborted && !this.#stopped) {
      const ended = new Promise<Error>((resolve) => {
        this.#endSubscription = () => resolve(new Error('agent stopped'))
        this.options.containerd.subscribe((event) => {
          // An exec's exit (payload id is the exec id) changes nothing: only init processes matter.
          const execExit = event.topic === '/tasks/exit' && event.payload?.id !== event.payload?.container_id
          if (!execExit && /^\/(tasks\/(start|exit|delete)|containers\/(create|update|delete))$/.test(event.topic)) this.#batcher.add(event.topic)
        }, resolve).then((unsubscribe) => {
          // Stopped while subscribing: an open stream would keep the process alive.
          if (this.#stopped) {
            unsubscribe()
            resolve(new Error('agent stopped'))
            return
          }
          this.#unsubscribe = unsubscribe
          failures = 0
          this.#setContainerd(true)
          this.#batcher.add('containerd connected') // no replay: re-list everything
        }, resolve)
      })
      const error = await ended
      if (signal.aborted || this.#stopped) return
      this.#setContainerd(false, error)
      failures++
      await sleep(Math.min(100 * 2 ** failures, 5000), undefined, {signal}).catch(() => {})
    }
  }

  #setContainerd(up: boolean, error?: Error): void {
    if (this.#containerdUp === up) return
    this.#containerdUp = up
    if (up) this.#log.info({address: this.options.containerd.options.address}, 'containerd connected')
    else {
      this.#metrics.errors.inc({kind: 'containerd'})
      this.#log.warn({address: this.options.containerd.options.address, err: error?.message}, 'containerd connection lost; retrying with back-off')
    }
  }

  /** The C heap's free pages go back to the kernel once no batch has run for a while (a burst leaves many). */
  #trimWhenQuiet(): void {
    clearTimeout(this.#trimTimer)
    this.#trimTimer = setTimeout(() => {
      const before = process.memoryUsage.rss()
      if (releaseFreeNativeMemory()) this.#log.debug({rssMb: Math.round(process.memoryUsage.rss() / 1048576), returnedMb: Math.round((before - process.memoryUsage.rss()) / 1048576)}, 'free native memory returned to the kernel')
    }, nativeTrimDelayMs).unref()
  }

  /** One batch: every running container of a pod that asks for classes gets exactly its wanted access. */
  async #reconcile(events: string[]): Promise<void> {
    // The first lists start a batch of their own. Without the namespaces no annotation could be judged.
    if (!this.#pods.synced || !this.#namespaces.synced) return
    const started = performance.now()
    this.#metrics.batchSize.observe(events.length)
    const pods = [...this.#pods.cache.values()].map((pod) => ({phase: pod.status?.phase, requests: containerRequests(pod), uid: pod.metadata.uid}))
    const requests = new Map<string, ContainerRequest>()
    for (const pod of pods) for (const r of pod.requests) requests.set(requestKey(r), r)
    let containers: RuntimeContainer[]
    let tasks: Map<string, number>
    try {
      // Workload containers only: the pods' sandboxes are half of the list and never hold devices.
      containers = await this.options.containerd.listContainers([`labels."${criLabels.kind}"==container`])
      tasks = new Map((await this.options.containerd.listTasks()).filter((t) => t.status === 'RUNNING').map((t) => [t.containerId, t.pid]))
    } catch (error) {
      this.#metrics.errors.inc({kind: 'containerd'})
      throw new Error(`cannot list containerd's containers: ${errorMessage(error)}`, {cause: error})
    }
    // `asked`: the container asks for a class, admitted or not; the class devices in its cgroup are then the
    // agent's to manage (a grant made before the policy, or lost from the record, is taken back too).
    const work: Array<{container: RuntimeContainer; pid: number; request: ContainerRequest; asked: boolean}> = []
    const mayHold = this.#mayHold
    for (const container of containers) {
      const pid = tasks.get(container.id)
      const l = container.labels
      if (pid === undefined || l[criLabels.kind] === 'sandbox') continue
      const request = requestOfContainer(l, requests)
      if (request !== undefined) work.push({asked: request.classes.size > 0, container, pid, request})
      else if (mayHold === undefined || mayHold.has(container.id)) {
        work.push({asked: false, container, pid, request: {
          classes: new Map(), container: l[criLabels.container] ?? '', namespace: l[criLabels.namespace] ?? '', pod: l[criLabels.pod] ?? '', podUid: l[criLabels.podUid] ?? '',
        }})
      }
    }
    const allocations = work.some((w) => this.#needsAllocations(w.request)) ? await listPodResources(this.options.podResourcesSocket).catch((error: unknown) => {
      this.#metrics.errors.inc({kind: 'pod-resources'})
      this.#log.warn({err: errorMessage(error)}, 'cannot read kubelet\'s PodResources; containers that ask by resource limit keep their access for now')
      return undefined
    }) : []
    const decision = decideAccess({
      classes: this.#classes, holders: this.#annotationHolders,
      // Skipped below when PodResources is away: true keeps their units counted meanwhile.
      limitAllocated: (r, name) => allocations === undefined || allocatedDevices(allocations, {name: r.pod, namespace: r.namespace}, r.container, resourceNameOf(name)).length > 0,
      limitHolders: limitHoldersOf(pods),
      namespaceLabels: (name) => this.#namespaces.cache.get(name)?.labels ?? (this.#namespaces.cache.has(name) ? {} : undefined),
      nodeName: this.options.nodeName, requests: work.map((w) => w.request).filter((r) => r.classes.size > 0 || r.annotationProblem !== undefined),
    })
    this.#tellRefusals(work.map((w) => w.request), decision, new Set(pods.map((p) => p.uid)))
    this.#annotationHolders = decision.holders
    for (const w of work) w.request = decision.admitted.get(requestKey(w.request)) ?? w.request
    this.#mayHold = new Set(work.filter((w) => w.request.classes.size > 0).map((w) => w.container.id))
    const listed = new Set(containers.map((c) => c.id))
    await this.#record(() => this.options.grants.retain(listed))
    for (const id of this.#unsupported) if (!listed.has(id)) this.#unsupported.delete(id)
    for (const id of this.#gone) if (!listed.has(id)) this.#gone.delete(id)
    const holding = new Map<string, NodeClassStatus['containers'][number][]>()
    const members = this.#plugins.members()
    const queue = [...work]
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        const {asked, container, pid, request} = next
        for (const name of request.classes.keys()) holding.set(name, [...(holding.get(name) ?? []), {container: request.container, namespace: request.namespace, pod: request.pod}])
        if (allocations === undefined && this.#needsAllocations(request)) continue
        try {
          // Still holding class devices (a revoke that failed): looked at again in the next batch.
          if (await this.#reconcileContainer(container, pid, request, asked, members, allocations ?? [])) this.#mayHold!.add(container.id)
        } catch (error) {
          this.#mayHold!.add(container.id)
          this.#log.warn({container: container.id, err: errorMessage(error), pod: `${request.namespace}/${request.pod}`}, 'could not update a container\'s devices')
        }
      }
    }
    await Promise.all(Array.from({length: Math.max(1, this.options.workers)}, worker))
    this.#setClassMetrics(members, holding)
    await this.#writeStatus(this.#reports(members, holding))
    this.#metrics.batchSeconds.observe((performance.now() - started) / 1000)
  }

  /**
   * Each refusal is told once while it lasts (until the pod goes or the class is admitted for it): an Event on
   * the pod (Revoked when the container held the class by annotation in the last batch, so the revoke in
   * this batch has its reason), a log line and the metric. A namespace not in the cache yet is not told.
   */
  #tellRefusals(requests: readonly ContainerRequest[], decision: PolicyDecision, podUids: ReadonlySet<string>): void {
    for (const key of this.#told) {
      const [uid, container, name] = key.split('/')
      if (!podUids.has(uid) || decision.admitted.get(`${uid}/${container}`)?.classes.has(name)) this.#told.delete(key)
    }
    for (const request of requests) {
      for (const refusal of decision.refused.get(requestKey(request)) ?? []) {
        const key = `${holderKey(request, refusal.class)}/${refusal.reason}`
        if (refusal.reason === 'namespace-pending' || this.#told.has(key)) continue
        this.#told.add(key)
        const revoked = this.#annotationHolders.has(holderKey(request, refusal.class))
        // Names no class has are the pod author's to choose: one metric series for all of them.
        const known = refusal.reason !== 'unknown-class' && refusal.reason !== 'bad-annotation'
        this.#metrics.requestsRefused.inc({class: known ? refusal.class : '(unknown)', reason: refusal.reason})
        this.#log.warn({
          class: refusal.class, container: request.container, namespace: request.namespace, pod: request.pod, reason: refusal.reason,
        }, `${revoked ? 'device access revoked' : 'device access refused'}: ${refusal.message}`)
        this.#events.warn({name: request.pod, namespace: request.namespace, uid: request.podUid}, revoked ? 'DeviceAccessRevoked' : 'DeviceAccessRefused', `container ${request.container}: ${refusal.message}`)
      }
    }
  }

  #setClassMetrics(members: ReadonlyMap<string, Device[]>, holding: ReadonlyMap<string, unknown[]>): void {
    this.#metrics.classContainers.reset()
    this.#metrics.classDevices.reset()
    for (const name of this.#classes.keys()) {
      this.#metrics.classContainers.set({class: name}, holding.get(name)?.length ?? 0)
      this.#metrics.classDevices.set({class: name}, members.get(name)?.length ?? 0)
    }
  }

  /**
   * Per class: the node's entry when the class applies here, and whether its spec is valid. A class whose
   * new spec is invalid keeps its entry at the generation still in use, and says so.
   */
  #reports(members: ReadonlyMap<string, Device[]>, holding: ReadonlyMap<string, NodeClassStatus['containers'][number][]>): Map<string, ClassReport> {
    const reports = new Map<string, ClassReport>()
    for (const [name, deviceClass] of this.#classes) {
      const generation = deviceClass.metadata.generation
      reports.set(name, {
        condition: {generation, message: `the spec is valid and in use on node ${this.options.nodeName}`, valid: true},
        entry: nodeClassStatus(this.options.nodeName, members.get(name) ?? [], holding.get(name) ?? [], generation),
      })
    }
    for (const problem of this.#invalid) {
      const using = problem.using === undefined ? 'the class is not served' : `generation ${problem.using}, the last valid one, stays in use`
      reports.set(problem.name, {...reports.get(problem.name), condition: {generation: problem.generation, message: `invalid spec: ${problem.message}; ${using}`, valid: false}})
    }
    return reports
  }

  /** What the node reports; failures are logged once per change and retried with the next batch. */
  async #writeStatus(entries: ReadonlyMap<string, ClassReport>): Promise<void> {
    try {
      await this.#status.write(entries)
      if (!this.#statusOk) this.#log.info({}, 'DeviceClass status written again')
      this.#statusOk = true
      this.#statusFailures = 0
    } catch (error) {
      this.#metrics.errors.inc({kind: 'status'})
      if (this.#statusOk) this.#log.warn({err: errorMessage(error)}, 'cannot write DeviceClass status; retrying with back-off')
      this.#statusOk = false
      this.#status.reset()
      // One retry pending at a time; any other batch meanwhile tries to write as well.
      clearTimeout(this.#statusRetry)
      const delayMs = Math.min(1000 * 2 ** this.#statusFailures++, 30_000)
      this.#statusRetry = setTimeout(() => this.#batcher.add('status retry'), delayMs).unref()
    }
  }

  /**
   * A class asked for by limit: whether kubelet allocated it, and with allocation Device which devices are
   * the container's, is kubelet's answer (PodResources).
   */
  #needsAllocations(request: ContainerRequest): boolean {
    return [...request.classes].some(([name, via]) => via === 'limit' && this.#classes.has(name))
  }

  /**
   * One container, pinned while it changes (ContainerHandle: its init process by pidfd, its root fd, its
   * device cgroup checked against its OCI spec). One whose process went away, or whose PID is no longer its,
   * is skipped (told once) and looked at again in the next batch: nothing is written through it.
   */
  async #reconcileContainer(container: RuntimeContainer, pid: number, request: ContainerRequest, asked: boolean, members: Map<string, Device[]>, pods: Awaited<ReturnType<typeof listPodResources>>): Promise<boolean> {
    try {
      const handle = await ContainerHandle.open(container, pid, {hasDeviceProgram, mode: this.options.cgroupMode})
      try {
        const holds = await this.#reconcileHandle(handle, container, request, asked, members, pods)
        this.#gone.delete(container.id)
        return holds
      } finally {
        handle.close()
      }
    } catch (error) {
      if (!(error instanceof ContainerGoneError)) throw error
      if (!this.#gone.has(container.id)) {
        this.#gone.add(container.id)
        this.#log.warn({container: container.id, err: error.message, pod: `${request.namespace}/${request.pod}`}, 'container skipped: its process is gone or not its own; the next batch looks again')
      }
      return true
    }
  }

  /**
   * Gives one container exactly its wanted class devices; true when it holds any of the agent's afterwards.
   * The agent's rules are those it recorded granting the container (so that a device unplugged while it was
   * away is still taken back, and its node removed where it was made) and, while the container asks for
   * classes, every class device: kubelet's Allocate put them in its spec, and the agent withdraws an
   * unplugged one and gives it back when it returns. Everything else is the runtime's and stays as it is,
   * on v2 read from the program attached (whichever runtime built it); a container that asks for nothing
   * (any more) keeps whatever its OCI spec allows, class devices included (a device given another way).
   */
  async #reconcileHandle(
    handle: ContainerHandle, container: RuntimeContainer, request: ContainerRequest, asks: boolean, members: Map<string, Device[]>, pods: Awaited<ReturnType<typeof listPodResources>>,
  ): Promise<boolean> {
    const {control} = handle
    const allocated = new Map<string, string[]>()
    for (const name of request.classes.keys()) allocated.set(name, allocatedDevices(pods, {name: request.pod, namespace: request.namespace}, request.container, resourceNameOf(name)))
    const wanted = wantedAccess({allocated, classes: this.#classes, members, request})
    const recordedList = this.options.grants.grants(container.id)
    const recorded = new Map(recordedList.map((g) => [ruleDeviceId(g), g]))
    const ours = (id: string): Device | undefined => {
      const device = asks ? this.#known.get(id) : undefined
      const grant = recorded.get(id)
      return grant === undefined ? device : {...(device ?? deviceOfGrant(grant)), devNode: grant.devNode}
    }
    const base = new Set(asks ? [] : ociDeviceRules(container.spec?.linux?.resources?.devices)
      .filter((r) => r.allow && r.type !== 'a' && r.major !== '*' && r.minor !== '*').map(ruleDeviceId))
    let held: HeldAccess
    try {
      held = await currentAccess(control, ours)
    } catch (error) {
      if (!(error instanceof UnsupportedProgramError)) throw error
      // A container that asks for nothing and was given nothing is not the agent's business, whatever program it has.
      if ((asks || recorded.size > 0) && !this.#unsupported.has(container.id)) {
        this.#unsupported.add(container.id)
        this.#metrics.errors.inc({kind: 'unsupported-cgroup'})
        this.#log.warn({container: container.id, err: error.message}, 'cannot change the container\'s device program; its devices are left as they are')
      }
      return false
    }
    let change = diffAccess(held.devices, wanted, base)
    if (change.grant.length === 0 && change.revoke.length === 0) {
      const kept = grantsAfter(recordedList, held.devices, change)
      await this.#record(() => this.options.grants.set(container.id, kept))
      return wanted.size > 0 || kept.length > 0
    }
    // Recorded before they are made: an agent that stops in between must still know them as its own.
    let granting = wanted
    if (change.grant.length > 0 && !(await this.#record(() => this.options.grants.set(container.id, grantsBefore(recordedList, change))))) {
      const notRecorded = new Set(change.grant.map((a) => a.device.id))
      granting = new Map([...wanted].filter(([id]) => !notRecorded.has(id)))
      change = {grant: [], revoke: change.revoke}
    }
    const ourRules = new Set([...held.devices.keys()].filter((id) => !base.has(id)))
    const program = held.program === undefined ? undefined : {
      replaces: held.program.id, rules: [...rulesWithout(held.program.rules, ourRules), ...[...granting.values()].map((a) => ({...ruleOf(a), allow: true}))],
    }
    try {
      await applyAccess(handle, change, program)
    } catch (error) {
      // A container gone meanwhile is #reconcileContainer's to tell, not a cgroup error.
      if (!(error instanceof ContainerGoneError)) this.#metrics.errors.inc({kind: 'cgroup'})
      throw error
    } finally {
      this.#metrics.ruleChanges.inc({action: 'grant'}, change.grant.length)
      this.#metrics.ruleChanges.inc({action: 'revoke'}, change.revoke.length)
    }
    const after = grantsAfter(this.options.grants.grants(container.id), held.devices, change)
    await this.#record(() => this.options.grants.set(container.id, after))
    this.#log.info({
      cgroup: control.mode, container: container.id.slice(0, 12), granted: change.grant.map((a) => `${a.device.devNode} ${a.access}`), pod: `${request.namespace}/${request.pod}`,
      revoked: change.revoke.map((a) => a.device.devNode), workload: request.container,
    }, 'devices updated')
    return granting.size > 0 || after.length > 0
  }

  /**
   * Writes the grant record; false when it cannot be written (told once until it can again). The record
   * in memory stays right: the next write that succeeds has it.
   */
  async #record(write: () => Promise<void>): Promise<boolean> {
    try {
      await write()
      if (this.#recordFailing) this.#log.info({file: this.options.grants.file}, 'the record of granted devices is written again')
      this.#recordFailing = false
      return true
    } catch (error) {
      this.#metrics.errors.inc({kind: 'state'})
      if (!this.#recordFailing) this.#log.error({err: errorMessage(error), file: this.options.grants.file}, 'cannot write the record of granted devices; no device is granted until it can be')
      this.#recordFailing = true
      return false
    }
  }
}

/** For --cgroup-mode auto; a host where bpf(2) is refused has no program the agent could replace anyway. */
function hasDeviceProgram(dir: string): boolean {
  try {
    return hasDevicePrograms(dir)
  } catch {
    return false
  }
}
