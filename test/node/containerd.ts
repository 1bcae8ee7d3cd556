import type {ChildProcess} from 'node:child_process'
import {execFile} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {launchDaemon, terminate} from '../support/daemon.js'
import {waitFor} from '../support/wait.js'
import {busyboxImage} from './images.js'

const run = promisify(execFile)

export interface ContainerdOptions {
  /** Config, root, state, sockets, CNI files and logs all live below it. */
  readonly dir: string
  /**
   * The pod network: a bridge inside the test's network namespace, with no route off the host. The bridge is
   * the pods' gateway, so that kubelet reaches their probe ports and they reach the API server's Service.
   */
  readonly podSubnet: string
  readonly bridge: string
  readonly detached?: boolean
}

/**
 * A private Debian containerd with the CRI plugin: own config, root, state and socket, cgroupfs, the
 * busybox image as sandbox image. `restrict_oom_score_adj` because this machine kind lacks
 * CAP_SYS_RESOURCE (runc cannot give a sandbox -998); `netns_mounts_under_state_dir` keeps pod network
 * namespaces out of /var/run/netns.
 */
export class Containerd {
  readonly socket: string
  #child: ChildProcess | undefined

  constructor(readonly options: ContainerdOptions) {
    this.socket = join(options.dir, 'run', 'containerd.sock')
  }

  get pid(): number | undefined {
    return this.#child?.pid
  }

  async start(): Promise<void> {
    const {dir} = this.options
    for (const sub of ['run', 'root', 'state', 'opt', 'runc-root', 'cni/net.d', 'cni/ipam']) await mkdir(join(dir, sub), {recursive: true})
    await writeFile(
      join(dir, 'cni/net.d/10-nfdctl-test.conflist'),
      JSON.stringify({
        cniVersion: '0.4.0',
        name: 'nfdctl-test',
        plugins: [
          {
            bridge: this.options.bridge,
            ipMasq: false,
            ipam: {dataDir: join(dir, 'cni/ipam'), ranges: [[{subnet: this.options.podSubnet}]], type: 'host-local'},
            isDefaultGateway: true,
            type: 'bridge',
          },
          {type: 'loopback'},
        ],
      }),
    )
    await writeFile(join(dir, 'config.toml'), configToml(dir))
    await this.#launch()
  }

  async #launch(): Promise<void> {
    const {dir} = this.options
    this.#child = launchDaemon('containerd', ['--config', join(dir, 'config.toml')], {detached: this.options.detached, logFile: join(dir, 'containerd.log')})
    const exited = new Promise<Error>((resolve) => this.#child!.once('exit', (code) => resolve(new Error(`containerd exited (${code}); see ${dir}/containerd.log`))))
    await waitFor('containerd', async () => (await this.ctr('version')).includes('Server'), {giveUpOn: exited, timeoutMs: 15_000})
  }

  /** Stops containerd alone (the shims keep the containers running, as on a real node) and starts it again. */
  async restart(downtime: () => Promise<void> = async () => {}): Promise<void> {
    await terminate(this.#child?.pid, this.#child)
    await downtime()
    await this.#launch()
  }

  /** Imports an OCI image tar into the `k8s.io` namespace, where the CRI plugin looks. */
  async importImage(tar: string): Promise<void> {
    await this.ctr('-n', 'k8s.io', 'images', 'import', tar)
  }

  /** Runs `ctr` against this containerd; resolves with stdout. */
  async ctr(...args: string[]): Promise<string> {
    return ctr(this.socket, ...args)
  }

  async stop(): Promise<void> {
    if (this.#child === undefined) return
    await stopContainerd(this.#child.pid!, this.socket, this.#child)
    this.#child = undefined
  }
}

/** Kills and removes every task and container kubelet left behind, then stops containerd (also one started detached). */
export async function stopContainerd(pid: number, socket: string, child?: ChildProcess): Promise<void> {
  const ids = await ctr(socket, '-n', 'k8s.io', 'containers', 'ls', '-q').then(
    (out) => out.split('\n').filter(Boolean),
    () => [],
  )
  for (const id of ids) await ctr(socket, '-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', id).catch(() => {})
  for (const id of ids) {
    await waitFor(
      `task ${id} to stop`,
      async () => {
        await ctr(socket, '-n', 'k8s.io', 'tasks', 'rm', '-f', id).catch(() => {})
        return !(await ctr(socket, '-n', 'k8s.io', 'tasks', 'ls', '-q')).split('\n').includes(id)
      },
      {timeoutMs: 10_000},
    ).catch(() => {})
    await ctr(socket, '-n', 'k8s.io', 'containers', 'rm', id).catch(() => {})
  }
  await terminate(pid, child)
}

async function ctr(socket: string, ...args: string[]): Promise<string> {
  const {stdout} = await run('ctr', ['--address', socket, ...args], {maxBuffer: 16 * 1024 * 1024})
  return stdout
}

function configToml(dir: string): string {
  return `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${dir}/run/containerd.sock"
[ttrpc]
  address = "${dir}/run/containerd.sock.ttrpc"
[debug]
  address = "${dir}/run/debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${busyboxImage}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # Device-plugin annotations reach the OCI spec only through this allow-list (as on a node set up for them).
      container_annotations = ["classes.devices.nfdctl.io/*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${dir}/runc-root"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${dir}/cni/net.d"
`
}
