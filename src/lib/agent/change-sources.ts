import type {ClassMembers} from '../devices/class-members.js'
import {DeviceWatcher, type DeviceSource} from '../devices/device-watcher.js'
import {Informer, MetadataInformer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {Logger} from '../observe/logger.js'
import type {DraDriver} from '../dra/dra-driver.js'
import type {PluginSet} from '../plugins/plugin-set.js'
import type {ContainerdClient, RuntimeContainer} from '../runtime/containerd-client.js'
import type {SourceReport, SourceSupervisor} from '../source-supervisor.js'
import type {AgentMetrics} from './agent-metrics.js'
import {containerRequests, criLabels, podCodec, type NodePod} from './container-access.js'
import {ContainerdFollower} from './containerd-follower.js'

export interface ChangeSourcesOptions {
  readonly nodeName: string
  readonly client: KubeClient
  readonly containerd: ContainerdClient
  /** Where devices come from (a SysfsScanner). */
  readonly devices: DeviceSource
  /** Kept in step with uevents, and the plugins' lists with them, before the agent hears of the change. */
  readonly members: ClassMembers
  readonly plugins: PluginSet
  /** The DRA driver, when on: its pool follows the same device events. */
  readonly dra?: DraDriver
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** Something that can change a container's access happened (named for the logs). */
  readonly onChange: (what: string) => void
  /** Restarts the uevent socket when it fails, and is told how containerd and the API server's watches fare. */
  readonly supervisor: SourceSupervisor
}

/** What runs now. */
export interface ListedContainers {
  readonly containers: RuntimeContainer[]
  readonly running: ReadonlyMap<string, number>
  /** When containerd last said something of a container (a generation: compare for equality only). */
  readonly touchedAt: (containerId: string) => number
}

const podsResource = {group: '', namespaced: true, plural: 'pods', version: 'v1'}
const namespacesResource = {group: '', namespaced: false, plural: 'namespaces', version: 'v1'}

/**
 * What can change a container's access, followed live: kernel uevents of class devices, containerd's event
 * stream (re-listed on every reconnect: it has no replay), the node's pods (only when what they ask for
 * changes: kubelet's status updates change nothing here) and the namespaces' labels (annotationAccess
 * selects by them).
 */
export class ChangeSources {
  readonly #watcher: DeviceWatcher
  readonly #pods: Informer<NodePod>
  readonly #namespaces: MetadataInformer
  readonly #containerd: ContainerdFollower
  readonly #uevents: SourceReport

  constructor(readonly options: ChangeSourcesOptions) {
    const {client, logger, members, metrics, onChange, plugins, supervisor} = options
    // A new socket and a rescan: what changed while the agent was deaf arrives as add and remove events.
    this.#uevents = supervisor.restartable('uevents', () => this.#watcher.reopen())
    const connection = (report: SourceReport) => (connected: boolean, error?: unknown) => (connected ? report.up() : report.failed(error))
    this.#watcher = new DeviceWatcher({
      coalesceChanges: true,
      logger,
      onError: (error) => this.#uevents.failed(error),
      source: options.devices,
      onEvent: ({action, device}) => {
        const touched = members.deviceEvent(action, device)
        // A device in no class (most of a node's uevents) changes no container's access.
        if (touched.size > 0) onChange(`device ${action} ${device.devName}`)
        plugins.publish(touched)
        // Written once the batch has given the containers their devices (see NodeAgent).
        options.dra?.devicesChanged(touched)
      },
    })
    this.#pods = new Informer<NodePod>(
      {
        client,
        fieldSelector: `spec.nodeName=${options.nodeName}`,
        logger,
        onChanged: (pod, previous) => this.#podChanged(pod, previous),
        onConnection: connection(supervisor.followed('API server (pods)')),
        onDeleted: (pod) => onChange(`pod ${pod.metadata.namespace}/${pod.metadata.name} deleted`),
        pageSize: 500,
        resource: podsResource,
      },
      podCodec,
    )
    this.#namespaces = new MetadataInformer({
      client,
      logger,
      onConnection: connection(supervisor.followed('API server (namespaces)')),
      onDeleted: (ns) => onChange(`namespace ${ns.name} deleted`),
      pageSize: 500,
      resource: namespacesResource,
      onChanged: (ns, previous) => {
        if (ns === undefined || previous === undefined || JSON.stringify(ns.labels ?? {}) !== JSON.stringify(previous.labels ?? {})) onChange(`namespace ${ns?.name ?? 'list'}`)
      },
    })
    this.#containerd = new ContainerdFollower({connection: supervisor.followed('containerd'), containerd: options.containerd, logger, metrics, onChange})
  }

  /** The node's pods and the namespaces are listed: only then can a batch judge who asks for what. */
  get listed(): boolean {
    return this.#pods.synced && this.#namespaces.synced
  }

  /** Why the agent cannot judge who asks for what yet; undefined once it can (the supervisor tells the rest). */
  notReady(): string | undefined {
    if (!this.#pods.synced) return 'pods not listed yet'
    if (!this.#namespaces.synced) return 'namespaces not listed yet'
    return undefined
  }

  /**
   * The workload containers and the running tasks' PIDs, by container id; undefined while containerd is not
   * connected (what runs is not known then).
   */
  async containers(): Promise<ListedContainers | undefined> {
    if (!this.#containerd.connected) return undefined
    const follower = this.#containerd
    return {containers: await follower.containers([`labels."${criLabels.kind}"==container`]), running: follower.running, touchedAt: (id) => follower.touchedAt(id)}
  }

  pods(): Iterable<NodePod> {
    return this.#pods.cache.values()
  }

  /** A namespace's labels; undefined when it is not known (yet). */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    return this.#namespaces.cache.get(name)?.labels ?? (this.#namespaces.cache.has(name) ? {} : undefined)
  }

  /** Devices first (the initial scan places every device), then the pods, namespaces and containerd, which may come later. */
  async start(signal: AbortSignal): Promise<void> {
    await this.#watcher.start(signal, (devices) => {
      for (const device of devices) this.options.members.deviceEvent('add', device)
    })
    this.#uevents.up()
  }

  /** The API server and containerd, which may answer later: their first lists are changes of their own. */
  follow(signal: AbortSignal): void {
    this.#pods.start(signal).catch(() => {}) // rejects only when stopped before the first list
    this.#namespaces.start(signal).catch(() => {})
    this.#containerd.start(signal)
  }

  async stop(): Promise<void> {
    await this.#containerd.stop()
    await this.#watcher.stop()
    await this.#pods.stop()
    await this.#namespaces.stop()
  }

  #podChanged(pod: NodePod | undefined, previous: NodePod | undefined): void {
    // By UID: a pod re-created under the same name is another pod.
    const asks = (p: NodePod): string => JSON.stringify(containerRequests(p).map((r) => [r.container, [...r.classes], r.annotationProblem]))
    if (pod === undefined) this.options.onChange('pods relisted')
    else if (previous?.metadata.uid !== pod.metadata.uid || asks(previous) !== asks(pod)) this.options.onChange(`pod ${pod.metadata.namespace}/${pod.metadata.name}`)
  }
}
