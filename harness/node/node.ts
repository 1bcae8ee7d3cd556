import {execFile} from 'node:child_process'
import {lstat, mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {terminate} from '../process/daemon.js'
import {Containerd, type ContainerdProcess, shimSocketDirOf, stopContainerd} from './containerd.js'
import {HostChanges, kubeletPluginDir} from './host-changes.js'
import {buildBusyboxImage} from './images.js'
import {Kubelet} from './kubelet.js'
import {MountNamespace} from './mount-namespace.js'
import {addNodeIp, nodeIpOf, outsideTestNetns, removeNodeIp} from './netns.js'
import {routeKubernetesService} from './service-proxy.js'

export interface TestNodeOptions {
  /** Everything of the node lives below it (kubelet root, containerd root and state, logs). */
  readonly dir: string
  /** Directory holding kubelet and containerd/ (harness/controlplane/build.sh kubelet containerd). */
  readonly binDir: string
  /** kubelet's kubeconfig (the admin one of the test control plane). */
  readonly kubeconfig: string
  readonly nodeName: string
  /** Leave containerd and kubelet running when this process exits (npm run node:up). */
  readonly detached?: boolean
  readonly log?: (line: string) => void
  /**
   * Route the `kubernetes` Service's ClusterIP to the API server (default true). Only a control plane started
   * as a cluster publishes its endpoint; a bare one (the device benchmarks without controllers) has none, and
   * its node's workloads do not reach the API server through the Service.
   */
  readonly kubernetesService?: boolean
  /**
   * 0 (the default): the first node, at the namespace's node address, its device-plugin directory linked at
   * kubelet's path on the host. 1, 2, …: a further node of the same control plane, started after the first:
   * its own address, pod bridge and subnet, and its kubelet and containerd in a mount namespace of their own
   * in which its device-plugin directory is mounted at kubelet's path. Not detached.
   */
  readonly index?: number
}

interface State {
  readonly kubeletPid: number
  readonly containerd: ContainerdProcess
  /** For the demo, which imports its image into this containerd. */
  readonly containerdSocket: string
}

const run = promisify(execFile)

/** Node `index`'s pod bridge and subnet: each node's pods have their own, routed inside the test namespace. */
const bridgeOf = (index: number): string => `nfdctlbr${index}`
const podSubnetOf = (index: number): string => `10.223.${index}.0/24`

/**
 * A real Kubernetes node on this machine: a private containerd and a real kubelet registered with the test
 * control plane, inside the test's network namespace (it refuses to start outside one). Pods really run.
 * stop() puts the host back (HostChanges).
 */
export class TestNode {
  private constructor(
    readonly options: TestNodeOptions,
    readonly containerd: Containerd,
    readonly kubelet: Kubelet,
    readonly host: HostChanges,
    readonly mountNamespace?: MountNamespace,
  ) {}

  get index(): number {
    return this.options.index ?? 0
  }

  /** kubelet's device-plugin directory as seen from the host (an agent's `--plugin-dir`). */
  get pluginDir(): string {
    return this.index === 0 ? kubeletPluginDir : this.host.record.pluginDirTarget
  }

  /** The node's InternalIP. */
  get ip(): string {
    return nodeIpOf(this.index)
  }

  get name(): string {
    return this.options.nodeName
  }

  /** The directory the node's containerd reads CDI specs from (a DRA driver's `--cdi-dir`). */
  get cdiDir(): string {
    return this.containerd.cdiDir
  }

  static async start(options: TestNodeOptions, client: KubeClient): Promise<TestNode> {
    const log = options.log ?? (() => {})
    const started = Date.now()
    const outside = await outsideTestNetns()
    if (outside !== undefined) throw new Error(`test node: ${outside}`)
    if (process.getuid?.() !== 0) throw new Error('test node: needs root (containerd, kubelet, cgroups, /var/lib/kubelet/device-plugins)')
    const index = options.index ?? 0
    const first = index === 0
    if (!first && options.detached) throw new Error('test node: a further node cannot be detached (its mount namespace lives with this process)')
    if (!first && (await lstat(kubeletPluginDir).catch(() => undefined)) === undefined) throw new Error(`test node: ${kubeletPluginDir} is absent: start the first test node before node ${index}`)
    await mkdir(options.dir, {recursive: true})
    const cgroupRoot = `/nfdctl-${options.nodeName}`
    const containerdDir = join(options.dir, 'containerd')
    const shimSocketDir = shimSocketDirOf(containerdDir)
    const host = await HostChanges.apply(options.dir, cgroupRoot, shimSocketDir.startsWith(`${options.dir}/`) ? [] : [shimSocketDir], first)
    let mountNamespace: MountNamespace | undefined
    if (!first) {
      await addNodeIp(nodeIpOf(index))
      mountNamespace = await MountNamespace.create(options.dir, [[host.record.pluginDirTarget, kubeletPluginDir]]).catch(async (error: unknown) => {
        await host.restore().catch(() => {})
        throw error
      })
    }
    const containerd = new Containerd({
      binDir: options.binDir,
      bridge: bridgeOf(index),
      cdiDir: join(options.dir, 'cdi'),
      detached: options.detached,
      dir: containerdDir,
      mountNamespace,
      podSubnet: podSubnetOf(index),
    })
    const kubelet = new Kubelet({
      binary: join(options.binDir, 'kubelet'),
      cgroupRoot,
      containerdSocket: containerd.socket,
      detached: options.detached,
      dir: join(options.dir, 'kubelet'),
      kubeconfig: options.kubeconfig,
      mountNamespace,
      nodeIp: nodeIpOf(index),
      nodeName: options.nodeName,
    })
    const node = new TestNode(options, containerd, kubelet, host, mountNamespace)
    try {
      // A Node of the same name left by an earlier run would have its old status and CSINode.
      await client.request('DELETE', `/api/v1/nodes/${options.nodeName}`).catch(() => {})
      await containerd.start()
      // One set of rules in the test namespace serves every node's pods: the first node makes them.
      if (first && options.kubernetesService !== false) await routeKubernetesService(client)
      const image = join(options.dir, 'busybox.tar')
      await buildBusyboxImage(image)
      await containerd.importImage(image)
      await kubelet.start(client)
      const state: State = {containerd: {ctr: containerd.ctrBinary, dir: containerdDir, pid: containerd.pid!}, containerdSocket: containerd.socket, kubeletPid: kubelet.pid!}
      await writeFile(join(options.dir, 'state.json'), JSON.stringify(state))
    } catch (error) {
      await node.stop().catch(() => {})
      throw error
    }
    log(`test node: ${options.nodeName} Ready in ${((Date.now() - started) / 1000).toFixed(1)}s (containerd ${containerd.socket}, logs in ${options.dir})`)
    return node
  }

  /** Stops kubelet, removes what it left in containerd, stops containerd, restores the host. Idempotent. */
  async stop(): Promise<void> {
    await this.kubelet.stop()
    await this.containerd.stop()
    if (this.mountNamespace !== undefined) {
      await this.mountNamespace.close()
      // The first node's bridge and address stay for the namespace's life; a further node's go with it.
      await run('ip', ['link', 'delete', bridgeOf(this.index)]).catch(() => {})
      await removeNodeIp(this.ip)
    }
    await this.host.restore()
  }

  /** Stops a node started by `start({detached: true})` in another process (npm run node:down). */
  static async stopDetached(dir: string): Promise<boolean> {
    const host = await HostChanges.load(dir)
    if (host === undefined) return false
    const state = await readFile(join(dir, 'state.json'), 'utf8').then(
      (text) => JSON.parse(text) as State,
      () => undefined,
    )
    if (state !== undefined) {
      await terminate(state.kubeletPid)
      await stopContainerd(state.containerd)
    }
    await host.restore()
    return true
  }

  /**
   * Runs a command that must fail in a running container; resolves with what it printed (stderr, stdout
   * and the error), rejects when it succeeds.
   */
  async execFailure(containerId: string, command: readonly string[]): Promise<string> {
    let output: string
    try {
      output = await this.exec(containerId, command)
    } catch (error) {
      const e = error as Error & {stderr?: string; stdout?: string}
      return `${e.stderr ?? ''}${e.stdout ?? ''}${e.message}`
    }
    throw new Error(`${command.join(' ')} succeeded in the container: ${output}`)
  }

  /** Runs a command in a running container (through containerd, as `kubectl exec` would end up doing). */
  async exec(containerId: string, command: readonly string[]): Promise<string> {
    return this.containerd.ctr(
      '-n',
      'k8s.io',
      'tasks',
      'exec',
      '--fifo-dir',
      join(this.options.dir, 'fifo'),
      '--exec-id',
      `nfdctl-test-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`,
      containerId,
      ...command,
    )
  }
}
