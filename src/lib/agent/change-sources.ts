import type {ClassMembers} from '../devices/class-members.js'
import type {DeviceEvent, DeviceWatcher, DeviceWatcherOptions} from '../devices/device-watcher.js'
import type {HostMounts} from '../devices/host-mounts.js'
import type {Followed} from '../kube/informer-events.js'
import type {ObjectMeta} from '../kube/resource.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import {Signal} from '../signal.js'
import type {SourceReport} from '../source-supervisor.js'
import type {ClaimDriver, DevicePlugins} from './agent-parts.js'
import {containerRequests, workloadContainers, type NodePod} from './container-access.js'
import type {ContainerdFollower} from './containerd-follower.js'

/** The node's devices followed from kernel uevents (a DeviceWatcher), and what it tells. */
export interface DeviceFeed {
  readonly watcher: Pick<DeviceWatcher, 'reopen' | 'start' | 'stop'>
  readonly events: Signal<DeviceEvent>
  readonly failures: Signal<Error>
}

/** A device watcher built with options that relay its events and failures, and those as signals. */
export function deviceFeed(build: (relay: Pick<DeviceWatcherOptions, 'onError' | 'onEvent'>) => DeviceFeed['watcher']): DeviceFeed {
  const events = new Signal<DeviceEvent>()
  const failures = new Signal<Error>()
  return {events, failures, watcher: build({onError: (error) => failures.emit(error), onEvent: (event) => events.emit(event)})}
}

/** Class devices came, went or changed: the classes whose members changed. */
export interface DeviceChange {
  /** Named for the logs. */
  readonly what: string
  readonly classes: ReadonlySet<string>
}

export interface ChangeSourcesOptions {
  readonly devices: DeviceFeed
  /** The node's mounts and swaps, followed from start: a device the node mounts is one it may no longer hold. */
  readonly mounts: Pick<HostMounts, 'start' | 'stop'>
  /** The node's mounts changed what the classes serve (the members judged again and the plugins told already): those classes. */
  readonly hostChanged: Signal<ReadonlySet<string>>
  /** The uevent socket's report: restarted by the supervisor (reopen) when it fails. */
  readonly uevents: SourceReport
  /** The node's pods (spec.nodeName) and the namespaces (metadata: their labels). */
  readonly pods: Followed<NodePod>
  readonly namespaces: Followed<ObjectMeta>
  /** containerd's containers and running tasks; its own changes go to `changes` from where it was built. */
  readonly containerd: Pick<ContainerdFollower, 'connected' | 'containers' | 'running' | 'start' | 'stop' | 'touchedAt'>
  /** Kept in step with uevents, and the plugins' lists with them, before the agent hears of the change. */
  readonly members: Pick<ClassMembers, 'deviceEvent'>
  readonly plugins: Pick<DevicePlugins, 'publish'>
  /** The DRA driver, when on: its pool follows the same device events. */
  readonly dra?: Pick<ClaimDriver, 'devicesChanged'>
  /** Something that can change who may hold what happened: a pod, a namespace (named for the logs). */
  readonly changes: Signal<string>
  /** Class devices came, went or changed: what containers may hold stays, what they are given changes. */
  readonly deviceChanges: Signal<DeviceChange>
}

/** What runs now. */
export interface ListedContainers {
  readonly containers: RuntimeContainer[]
  readonly running: ReadonlyMap<string, number>
  /** When containerd last said something of a container (a generation: compare for equality only). */
  readonly touchedAt: (containerId: string) => number
}

/**
 * What can change a container's access, followed live: kernel uevents of class devices, the node's mounts,
 * containerd's event stream (re-listed on every reconnect: it has no replay), the node's pods (only when what
 * they ask for changes: kubelet's status updates change nothing here) and the namespaces' labels
 * (annotationAccess selects by them). A pod or namespace change is one event on `changes`, a class device's
 * or a mount's on `deviceChanges`.
 */
export class ChangeSources {
  constructor(readonly options: ChangeSourcesOptions) {
    const {changes, deviceChanges, devices, hostChanged, members, namespaces, plugins, pods, uevents} = options
    hostChanged.listen((touched) => {
      if (touched.size === 0) return
      deviceChanges.emit({classes: touched, what: "the node's mounts changed"})
      options.dra?.devicesChanged(touched)
    })
    devices.failures.listen((error) => uevents.failed(error))
    devices.events.listen(({action, device}) => {
      const touched = members.deviceEvent(action, device)
      // A device in no class (most of a node's uevents) changes no container's access.
      if (touched.size > 0) deviceChanges.emit({classes: touched, what: `device ${action} ${device.devName}`})
      plugins.publish(touched)
      // Written once the batch has given the containers their devices (see NodeAgent).
      options.dra?.devicesChanged(touched)
    })
    pods.events.listen((event) => {
      if (event.type === 'deleted') changes.emit(`pod ${event.object.metadata.namespace}/${event.object.metadata.name} deleted`)
      else this.#podChanged(event.object, event.previous)
    })
    namespaces.events.listen((event) => {
      if (event.type === 'deleted') return changes.emit(`namespace ${event.object.name} deleted`)
      const ns = event.object
      if (ns === undefined || event.previous === undefined || JSON.stringify(ns.labels ?? {}) !== JSON.stringify(event.previous.labels ?? {})) changes.emit(`namespace ${ns?.name ?? 'list'}`)
    })
  }

  /** The node's pods and the namespaces are listed: only then can a batch judge who asks for what. */
  get listed(): boolean {
    return this.options.pods.objects.synced && this.options.namespaces.objects.synced
  }

  /** Why the agent cannot judge who asks for what yet; undefined once it can (the supervisor tells the rest). */
  notReady(): string | undefined {
    if (!this.options.pods.objects.synced) return 'pods not listed yet'
    if (!this.options.namespaces.objects.synced) return 'namespaces not listed yet'
    return undefined
  }

  /**
   * The workload containers and the running tasks' PIDs, by container id; undefined while containerd is not
   * connected (what runs is not known then).
   */
  async containers(): Promise<ListedContainers | undefined> {
    const follower = this.options.containerd
    if (!follower.connected) return undefined
    return {containers: await follower.containers([workloadContainers]), running: follower.running, touchedAt: (id) => follower.touchedAt(id)}
  }

  pods(): Iterable<NodePod> {
    return this.options.pods.objects.cache.values()
  }

  /** A namespace's labels; undefined when it is not known (yet). */
  namespaceLabels(name: string): Readonly<Record<string, string>> | undefined {
    const {cache} = this.options.namespaces.objects
    return cache.get(name)?.labels ?? (cache.has(name) ? {} : undefined)
  }

  /** Devices first (the initial scan places every device), then the pods, namespaces and containerd, which may come later. */
  async start(signal: AbortSignal): Promise<void> {
    // Before the scan: a mount made meanwhile is not missed.
    this.options.mounts.start(signal)
    await this.options.devices.watcher.start(signal, (devices) => {
      for (const device of devices) this.options.members.deviceEvent('add', device)
    })
    this.options.uevents.up()
  }

  /** The API server and containerd, which may answer later: their first lists are changes of their own. */
  follow(signal: AbortSignal): void {
    this.options.pods.objects.start(signal).catch(() => {}) // rejects only when stopped before the first list
    this.options.namespaces.objects.start(signal).catch(() => {})
    this.options.containerd.start(signal)
  }

  async stop(): Promise<void> {
    await this.options.containerd.stop()
    await this.options.devices.watcher.stop()
    this.options.mounts.stop()
    await this.options.pods.objects.stop()
    await this.options.namespaces.objects.stop()
  }

  #podChanged(pod: NodePod | undefined, previous: NodePod | undefined): void {
    // By UID: a pod re-created under the same name is another pod.
    const asks = (p: NodePod): string => JSON.stringify(containerRequests(p).map((r) => [r.container, [...r.classes], r.annotationProblem]))
    if (pod === undefined) this.options.changes.emit('pods relisted')
    else if (previous?.metadata.uid !== pod.metadata.uid || asks(previous) !== asks(pod)) this.options.changes.emit(`pod ${pod.metadata.namespace}/${pod.metadata.name}`)
  }
}
