import * as Flags from '@oclif/core/flags'
import {hostname} from 'node:os'

import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {buildNodeAgent} from '../../cli/node-agent-parts.js'
import {nodeFlags} from '../../cli/node-flags.js'
import {observeFlags} from '../../cli/observe-flags.js'
import {pluginFlags} from '../../cli/plugin-flags.js'
import {untilAborted} from '../../lib/abort.js'
import {agentOptionsFrom} from '../../lib/agent/agent-options.js'
import {checkHost} from '../../lib/agent/host-check.js'
import {lockStateDir} from '../../lib/agent/state-dir-lock.js'
import {loadClassFiles} from '../../lib/devices/class-file.js'
import {errorMessage, ExitCode} from '../../lib/errors.js'
import {openCluster} from '../../lib/kube/connect.js'
import {HealthServer} from '../../lib/observe/health-server.js'
import {createLogger} from '../../lib/observe/logger.js'
import {Registry} from '../../lib/observe/prometheus.js'

export default class DevicesAgent extends NfdctlCommand {
  static override description =
    `The node agent: running containers get the devices of the DeviceClasses (devices.nfdctl.io) they asked for, including devices plugged in after they started, and lose them when the devices go.

Containers ask by resource limit devices.nfdctl.io/<class> (the agent also serves the kubelet device plugins, as plugins serve does), by the pod annotation devices.nfdctl.io/<container-name>: class-a,class-b, which a class admits only with spec.annotationAccess (refusals are Events on the pod), or, with --dra, by a ResourceClaim of a class with allocation DRA: the agent is then the DRA driver devices.nfdctl.io (ResourceSlices of the node's devices, a resource.k8s.io DeviceClass <class>.devices.nfdctl.io per class, kubelet's DRA plugin with CDI devices in --cdi-dir), and a claimed device unplugged and plugged in again returns to the running containers of the claim. Kernel uevents, containerd's events and the node's pods are batched by group commit (an event that finds no batch running is processed at once; what arrives meanwhile goes in the next batch) and each batch applies only the difference: a cgroup v1 device rule or a replaced cgroup v2 device program, and a device node inside the container. SIGTERM stops the agent and leaves granted access in place.`
  static override examples = [
    '<%= config.bin %> <%= command.id %> --node-name worker-1',
    '<%= config.bin %> <%= command.id %> --kubeconfig /etc/nfdctl/kubeconfig --containerd-address /run/containerd/containerd.sock --cdi',
    '<%= config.bin %> <%= command.id %> --dra --cdi-dir /var/run/cdi',
  ]
  static override flags = {
    'batch-max-wait': Flags.string({default: '1s', description: 'with --batch-quiet: a batch waits at most this long after its first event'}),
    'batch-quiet': Flags.string({
      default: '0s',
      description:
        'optional minimum delay: a batch waits until events pause this long (at most --batch-max-wait). Default 0s, off: an event that finds no batch running is processed at once, and what arrives during a batch goes in the next, which starts as soon as that one ends',
    }),
    'cgroup-mode': Flags.option({
      default: 'auto',
      description:
        'device control to change: auto (per container: v2 when its cgroup2 directory has a device program, or the host has no v1 devices controller), v1 (devices.allow), v2 (BPF device programs; also the v1 rule on a hybrid host)',
      options: ['auto', 'v1', 'v2'] as const,
    })(),
    'class-file': Flags.string({description: "DeviceClass file (YAML or JSON; repeatable), besides the cluster's classes", multiple: true}),
    'containerd-address': Flags.string({default: '/run/containerd/containerd.sock', description: "containerd's gRPC socket"}),
    'containerd-namespace': Flags.string({default: 'k8s.io', description: "containerd namespace of kubelet's containers"}),
    dra: Flags.boolean({
      description: "also be the DRA driver devices.nfdctl.io for the classes with allocation DRA: ResourceSlices, resource.k8s.io DeviceClasses, and kubelet's DRA plugin (CDI specs in --cdi-dir)",
    }),
    'kubelet-dir': Flags.string({default: '/var/lib/kubelet', description: "kubelet's root directory (--root-dir): with --dra, its plugins_registry/ and plugins/ directories"}),
    'pod-resources-socket': Flags.string({default: '/var/lib/kubelet/pod-resources/kubelet.sock', description: "kubelet's PodResources socket (the devices it allocated)"}),
    'state-dir': Flags.string({
      default: '/var/lib/nfdctl/agent',
      description: "where the node's classes (for a start without the API server) and the devices granted to containers (taken back after a restart) are kept",
    }),
    'wait-for-lock': Flags.boolean({
      description:
        'when another agent holds --state-dir, wait until it exits and then start (a DaemonSet update with maxSurge; /readyz answers 200 meanwhile, so the old pod is replaced), instead of exiting 1',
    }),
    workers: Flags.integer({default: 4, description: 'containers updated in parallel'}),
    ...nodeFlags,
    ...pluginFlags,
    ...observeFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(DevicesAgent)
    const options = agentOptionsFrom(flags, Boolean(process.stdout.isTTY), {env: process.env, hostname: hostname()})
    const {nodeName} = options
    const log = createLogger({base: {component: 'agent', node: nodeName}, format: options.logFormat, level: options.logLevel})

    const fileClasses = await loadClassFiles(flags['class-file'] ?? [])
    const {client} = await openCluster({context: flags.context, kubeconfig: flags.kubeconfig}, {burst: 20, qps: 50})
    const stateDir = flags['state-dir']
    const host = await checkHost({containerdAddress: flags['containerd-address']})
    if (typeof host.pidNamespace === 'object') log.warn({err: host.pidNamespace.unknown}, "containerd does not answer: whether the agent runs in the host's PID namespace is not checked")
    const registry = new Registry()
    // Waiting for the lock, the agent is ready: a maxSurge update deletes the old pod only once the new one is.
    let readiness = (): {ready: boolean; reason: string} => ({ready: true, reason: `standby: waiting for the lock on ${stateDir}`})
    const health = new HealthServer({host: options.metricsHost, port: options.metricsPort, readiness: () => readiness(), registry})
    // Refused at once without --wait-for-lock, before the health port (the holder's, on the same network) is asked for.
    const taken = flags['wait-for-lock'] ? undefined : await lockStateDir(stateDir, this.signal, {wait: false})
    if (options.metricsPort > 0) await health.start()
    const onWaiting = (holder?: number): void => log.warn({holder, stateDir}, 'another agent holds the state directory; waiting for it to exit (--wait-for-lock)')
    const lock = taken ?? (await lockStateDir(stateDir, this.signal, {onWaiting, wait: true}))
    const {agent, containerd, supervisor} = buildNodeAgent({client, fileClasses, flags, logger: log, options, registry})
    readiness = () => agent.status()
    log.info({containerd: flags['containerd-address'], dra: flags.dra, metricsPort: options.metricsPort, stateDir}, 'devices agent starting')
    await agent.start(this.signal)
    const ended = AbortSignal.any([this.signal, supervisor.fatal])
    await untilAborted(ended)
    supervisor.stop()
    if (supervisor.fatal.aborted) {
      // One line naming the source and its last error; exit 1, and the DaemonSet starts a new agent.
      log.error({err: errorMessage(supervisor.fatal.reason)}, 'a source cannot come back; exiting 1, granted access stays')
      process.exitCode = ExitCode.failed
    } else log.info({reason: errorMessage(this.signal.reason)}, 'shutting down; granted access stays')
    await agent.stop()
    await health.stop()
    containerd.close()
    client.close()
    lock.release()
    log.info({}, 'stopped')
  }
}
