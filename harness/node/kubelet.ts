import type {ChildProcess} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {kubeFeatureGates} from '../controlplane/paths.js'
import {launchDaemon, terminate} from '../process/daemon.js'
import {waitFor} from '../process/wait.js'
import type {MountNamespace} from './mount-namespace.js'

export interface KubeletOptions {
  readonly binary: string
  /** --root-dir, config, certificates, pod logs and kubelet logs live below it. */
  readonly dir: string
  readonly kubeconfig: string
  readonly nodeName: string
  /** A non-loopback address on the test namespace's lo: kubelet refuses a loopback node IP. */
  readonly nodeIp: string
  readonly containerdSocket: string
  /** A private cgroup parent, so that the test's pods stay away from any other kubepods. */
  readonly cgroupRoot: string
  readonly detached?: boolean
  /** Run inside this mount namespace (a second node's, shared with its containerd). */
  readonly mountNamespace?: MountNamespace
}

/**
 * A real kubelet for a real Node, with the settings a test machine without systemd or a full cgroup tree needs:
 * cgroup v1 allowed, cgroupfs, anonymous + AlwaysAllow (kube-apiserver has no kubelet client
 * certificate here), status every second so that allocatable follows plugins quickly.
 */
export class Kubelet {
  readonly rootDir: string
  #child: ChildProcess | undefined
  #starts = 0

  constructor(readonly options: KubeletOptions) {
    this.rootDir = join(options.dir, 'root')
  }

  get pid(): number | undefined {
    return this.#child?.pid
  }

  /** kubelet's PodResources socket; it follows --root-dir (the device-plugin directory does not). */
  get podResourcesSocket(): string {
    return join(this.rootDir, 'pod-resources', 'kubelet.sock')
  }

  /** Starts kubelet; with a client, resolves once the Node is Ready with a heartbeat from this process. */
  async start(client?: KubeClient): Promise<void> {
    const {dir} = this.options
    await mkdir(join(dir, 'pod-logs'), {recursive: true})
    await mkdir(this.rootDir, {recursive: true})
    await writeFile(join(dir, 'kubelet-config.yaml'), configYaml(this.options, join(dir, 'pod-logs')))
    const startedAt = Date.now()
    this.#starts++
    const args = [
      `--config=${join(dir, 'kubelet-config.yaml')}`,
      `--kubeconfig=${this.options.kubeconfig}`,
      `--root-dir=${this.rootDir}`,
      `--cert-dir=${join(dir, 'pki')}`,
      `--hostname-override=${this.options.nodeName}`,
      `--node-ip=${this.options.nodeIp}`,
      '--v=2',
    ]
    const launch = this.options.mountNamespace?.launch(this.options.binary, args) ?? {args, command: this.options.binary}
    const child = launchDaemon(launch.command, launch.args, {detached: this.options.detached, logFile: join(dir, `kubelet.${this.#starts}.log`)})
    this.#child = child
    if (client === undefined) return
    const exited = new Promise<Error>((resolve) => child.once('exit', (code) => resolve(new Error(`kubelet exited (${code}); see ${dir}/kubelet.${this.#starts}.log`))))
    await waitFor(
      `Node ${this.options.nodeName} Ready`,
      async () => {
        const node = await client.request<NodeStatus>('GET', `/api/v1/nodes/${this.options.nodeName}`)
        const ready = node.status?.conditions?.find((c) => c.type === 'Ready')
        // Heartbeats have second precision; a Ready written by an earlier kubelet does not count.
        return ready?.status === 'True' && Date.parse(ready.lastHeartbeatTime) >= Math.floor(startedAt / 1000) * 1000
      },
      {giveUpOn: exited, timeoutMs: 60_000},
    )
  }

  async stop(): Promise<void> {
    if (this.#child === undefined) return
    await terminate(this.#child.pid, this.#child)
    this.#child = undefined
  }
}

interface NodeStatus {
  status?: {conditions?: Array<{type: string; status: string; lastHeartbeatTime: string}>}
}

function configYaml(options: KubeletOptions, podLogsDir: string): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: ${options.cgroupRoot}
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://${options.containerdSocket}
imageServiceEndpoint: unix://${options.containerdSocket}
address: ${options.nodeIp}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podLogsDir: ${podLogsDir}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1s
syncFrequency: 10s
featureGates: ${JSON.stringify(kubeFeatureGates)}
`
}
