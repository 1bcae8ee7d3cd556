import {createAgentMetrics} from '../lib/agent/agent-metrics.js'
import type {AgentOptions} from '../lib/agent/agent-options.js'
import {ChangeSources, deviceFeed, type DeviceChange} from '../lib/agent/change-sources.js'
import {podCodec, type NodePod} from '../lib/agent/container-access.js'
import {ContainerReconciler} from '../lib/agent/container-reconciler.js'
import {ContainerdFollower} from '../lib/agent/containerd-follower.js'
import {GrantReadiness} from '../lib/agent/grant-readiness.js'
import {GrantRecord} from '../lib/agent/grant-record.js'
import {batchProcess, NodeAgent} from '../lib/agent/node-agent.js'
import {NodeReconciler} from '../lib/agent/node-reconciler.js'
import {PodEvents} from '../lib/agent/pod-events.js'
import {RefusalNotices} from '../lib/agent/refusal-notices.js'
import {sweepAtStart} from '../lib/agent/start-sweep.js'
import {StatusReporter} from '../lib/agent/status-reporter.js'
import {followClusterClasses} from '../lib/devices/class-informers.js'
import {ClassStateFile} from '../lib/devices/class-state-file.js'
import {ClassStore} from '../lib/devices/class-store.js'
import {DeviceWatcher} from '../lib/devices/device-watcher.js'
import {OwnedDevices} from '../lib/devices/owned-devices.js'
import type {DeviceClass} from '../lib/devices/types.js'
import {createDraMetrics} from '../lib/dra/dra-metrics.js'
import {DraDriver} from '../lib/dra/dra-driver.js'
import {errorMessage} from '../lib/errors.js'
import {EventBatcher} from '../lib/event-batcher.js'
import {followed} from '../lib/kube/informer-events.js'
import {Informer, MetadataInformer} from '../lib/kube/informer.js'
import type {KubeClient} from '../lib/kube/kube-client.js'
import type {ObjectMeta} from '../lib/kube/resource.js'
import {NativeMemoryTrim} from '../lib/native-memory.js'
import type {Logger} from '../lib/observe/logger.js'
import type {Registry} from '../lib/observe/prometheus.js'
import {listPodResources} from '../lib/kubelet/pod-resources.js'
import {ContainerdClient} from '../lib/runtime/containerd-client.js'
import {runtimeCdiProblem, runtimeSeesDir} from '../lib/runtime/runtime-cdi.js'
import {Signal} from '../lib/signal.js'
import {SourceSupervisor, type SourceReport} from '../lib/source-supervisor.js'
import {classPlugins, type RawPluginFlags} from './plugin-flags.js'

export interface NodeAgentFlags extends RawPluginFlags {
  readonly 'containerd-address': string
  readonly 'containerd-namespace': string
  readonly dra: boolean
  readonly 'kubelet-dir': string
  readonly 'pod-resources-socket': string
  readonly 'state-dir': string
}

export interface NodeAgentInput {
  readonly flags: NodeAgentFlags
  readonly options: AgentOptions
  readonly client: KubeClient
  readonly fileClasses: readonly DeviceClass[]
  readonly logger: Logger
  readonly registry: Registry
}

/** The agent and what the command closes after it. */
export interface NodeAgentParts {
  readonly agent: NodeAgent
  readonly supervisor: SourceSupervisor
  readonly containerd: ContainerdClient
}

const podsResource = {group: '', namespaced: true, plural: 'pods', version: 'v1'}
const namespacesResource = {group: '', namespaced: false, plural: 'namespaces', version: 'v1'}

/** An informer's connection told to the supervisor (/readyz). */
const reportTo =
  (report: SourceReport) =>
  (connected: boolean, error?: unknown): void =>
    connected ? report.up() : report.failed(error)

/**
 * Builds the node agent's parts and hands them to NodeAgent: each part gets what it talks to, and parts that
 * must not hold each other meet on a Signal: `changes` (everything that can change who may hold what, the
 * DRA driver's claims included), `containerChanges` (containerd's) and `deviceChanges` (class devices).
 */
export function buildNodeAgent({client, fileClasses, flags, logger, options, registry}: NodeAgentInput): NodeAgentParts {
  const {nodeName} = options
  const stateDir = flags['state-dir']
  const supervisor = new SourceSupervisor({logger})
  const metrics = createAgentMetrics(registry)
  const stateError = (): void => metrics.errors.inc({kind: 'state'})
  const changes = new Signal<string>()
  const containerChanges = new Signal<string>()
  const deviceChanges = new Signal<DeviceChange>()
  const containerd = new ContainerdClient({address: flags['containerd-address'], namespace: flags['containerd-namespace']})
  const classStore = new ClassStore({
    ...followClusterClasses(client, nodeName, logger),
    client,
    fileClasses,
    logger,
    nodeName,
    persisted: new ClassStateFile({logger, nodeName, onWriteError: stateError, stateDir}),
  })
  const owned = new OwnedDevices({stateDir})
  const {hostChanged, members, mounts, plugins, scanner} = classPlugins(flags, {logger, onOwnedError: stateError, owned, registry})
  const dra = flags.dra
    ? new DraDriver({
        cdiDir: flags['cdi-dir'],
        client,
        clusterClasses: () => classStore.clusterClasses,
        clusterListed: () => classStore.synced,
        kubeletDir: flags['kubelet-dir'],
        logger,
        members,
        metrics: createDraMetrics(registry),
        nodeName,
        beforePrepare: () => owned.saved(),
        // Claims prepared or unprepared change what containers may hold: the agent runs a batch.
        onClaimsChanged: () => changes.emit('claims changed'),
        // Said in the DRA classes' status by the next batch.
        onDroppedChanged: () => changes.emit('dropped features changed'),
        // containerd's own CRI configuration says whether claims' CDI devices reach containers.
        runtimeCdi: async () => runtimeCdiProblem(await containerd.criConfig(), flags['cdi-dir'], runtimeSeesDir(flags['containerd-address'], flags['cdi-dir'])),
        stateDir,
        supervisor,
      })
    : undefined
  const devices = deviceFeed((relay) => new DeviceWatcher({coalesceChanges: true, logger, source: scanner, ...relay}))
  // A new socket and a rescan: what changed while the agent was deaf arrives as add and remove events.
  const uevents = supervisor.restartable('uevents', () => devices.watcher.reopen())
  const pods = followed<NodePod>(
    (relay) =>
      new Informer<NodePod>(
        {client, fieldSelector: `spec.nodeName=${nodeName}`, logger, onConnection: reportTo(supervisor.followed('API server (pods)')), pageSize: 500, resource: podsResource, ...relay},
        podCodec,
      ),
  )
  const namespaces = followed<ObjectMeta>(
    (relay) => new MetadataInformer({client, logger, onConnection: reportTo(supervisor.followed('API server (namespaces)')), pageSize: 500, resource: namespacesResource, ...relay}),
  )
  const follower = new ContainerdFollower({connection: supervisor.followed('containerd'), containerd, logger, metrics, onChange: (what) => containerChanges.emit(what)})
  const sources = new ChangeSources({changes, containerd: follower, deviceChanges, devices, dra, hostChanged, members, mounts, namespaces, plugins, pods, uevents})
  const grantHealth = new GrantReadiness(logger)
  const grants = new GrantRecord({stateDir})
  const podEvents = new PodEvents({client, logger, nodeName, onError: () => metrics.errors.inc({kind: 'events'})})
  const status = new StatusReporter({client, logger, metrics, nodeName, retry: () => changes.emit('status retry')})
  const trim = new NativeMemoryTrim(logger)
  const containers = new ContainerReconciler({cgroupMode: options.cgroupMode, grants, logger, metrics, onSkipped: (error) => grantHealth.skipped(error)})
  const reconciler = new NodeReconciler({
    claimed: dra === undefined ? undefined : (container) => dra.claimed(container),
    dropped: dra === undefined ? undefined : () => dra.dropped(),
    runtimeProblem: dra === undefined ? undefined : () => dra.runtimeProblem(),
    classes: () => classStore.view,
    containers: () => sources.containers(),
    logger,
    members,
    metrics,
    namespaceLabels: (name) => sources.namespaceLabels(name),
    owned,
    nodeName,
    notices: new RefusalNotices({events: podEvents, logger, metrics}),
    outcome: (outcome) => grantHealth.batchDone(outcome),
    podResources: () => listPodResources(flags['pod-resources-socket']),
    pods: () => sources.pods(),
    reconciler: containers,
    status,
    workers: options.workers,
  })
  const batcher = new EventBatcher<string>({
    maxWaitMs: options.maxWaitMs,
    onError: (error) => logger.error({err: errorMessage(error)}, 'batch failed; the next event retries'),
    process: batchProcess({dra, metrics, reconciler, sources, trim}),
    quietMs: options.quietMs,
  })
  const agent = new NodeAgent({
    afterBatches: [grants, podEvents, trim, status],
    batcher,
    changes,
    classStore,
    containerChanges,
    deviceChanges,
    dra,
    grantHealth,
    grants,
    lane: reconciler,
    logger,
    members,
    metrics,
    nodeName,
    owned,
    plugins,
    sources,
    startSweep: () => sweepAtStart({containerd, grants: (id) => grants.grants(id), logger, owned: () => owned.all(), present: () => members.present(), reconciler: containers}),
    supervisor,
  })
  return {agent, containerd, supervisor}
}
