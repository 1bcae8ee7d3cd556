import type {ChildProcess} from 'node:child_process'
import {execFile} from 'node:child_process'
import {createHash} from 'node:crypto'
import {accessSync, constants} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import {delimiter, join} from 'node:path'
import {promisify} from 'node:util'

import {containerdBinary} from '../controlplane/paths.js'
import {launchDaemon, terminate} from '../process/daemon.js'
import {waitFor} from '../process/wait.js'
import {busyboxImage} from './images.js'
import type {MountNamespace} from './mount-namespace.js'

const run = promisify(execFile)

export interface ContainerdOptions {
  /** Config, root, state, sockets, CNI files and logs all live below it. */
  readonly dir: string
  /** Holds containerd/{containerd,ctr,containerd-shim-runc-v2} (harness/controlplane/build.sh containerd). */
  readonly binDir: string
  /** Where the CRI plugin reads CDI specs; nothing else is read. */
  readonly cdiDir: string
  /**
   * The pod network: a bridge inside the test's network namespace, with no route off the host. The bridge is
   * the pods' gateway, so that kubelet reaches their probe ports and they reach the API server's Service.
   */
  readonly podSubnet: string
  readonly bridge: string
  readonly detached?: boolean
  /** Run inside this mount namespace (a second node's, shared with its kubelet). */
  readonly mountNamespace?: MountNamespace
}

/**
 * A private containerd 2 (built from the Go module proxy) with the CRI plugin and CDI injection: own
 * config, root, state, sockets and shim sockets, cgroupfs, Debian's runc, the busybox image as sandbox
 * image. `restrict_oom_score_adj` because this machine kind lacks CAP_SYS_RESOURCE (runc cannot give a
 * sandbox -998); `netns_mounts_under_state_dir` keeps pod network namespaces out of /var/run/netns; NRI is
 * off (it would listen on /var/run/nri/nri.sock).
 */
export class Containerd {
  readonly socket: string
  readonly cdiDir: string
  readonly #ctr: string
  #child: ChildProcess | undefined

  constructor(readonly options: ContainerdOptions) {
    this.socket = socketOf(options.dir)
    this.cdiDir = options.cdiDir
    this.#ctr = containerdBinary(options.binDir, 'ctr')
  }

  get pid(): number | undefined {
    return this.#child?.pid
  }

  /** The ctr binary of the same release, for `ctr` calls from outside (npm run node:down, the demo). */
  get ctrBinary(): string {
    return this.#ctr
  }

  async start(): Promise<void> {
    const {dir} = this.options
    for (const sub of ['run', 'root', 'state', 'opt', 'runc-root', 'cni/net.d', 'cni/ipam']) await mkdir(join(dir, sub), {recursive: true})
    await mkdir(this.cdiDir, {recursive: true})
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
    await writeFile(
      join(dir, 'config.toml'),
      configToml({cdiDir: this.cdiDir, dir, runc: findRunc(), shim: containerdBinary(this.options.binDir, 'containerd-shim-runc-v2'), shimSocketDir: shimSocketDirOf(dir)}),
    )
    await this.#launch()
  }

  async #launch(): Promise<void> {
    const {dir, mountNamespace} = this.options
    const binary = containerdBinary(this.options.binDir, 'containerd')
    const args = ['--config', join(dir, 'config.toml')]
    const launch = mountNamespace?.launch(binary, args) ?? {args, command: binary}
    this.#child = launchDaemon(launch.command, launch.args, {
      detached: this.options.detached,
      logFile: join(dir, 'containerd.log'),
    })
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
    return ctr(this.#ctr, this.socket, ...args)
  }

  async stop(): Promise<void> {
    if (this.#child === undefined) return
    await stopContainerd({ctr: this.#ctr, dir: this.options.dir, pid: this.#child.pid!}, this.#child)
    this.#child = undefined
  }
}

/** What stopping a containerd takes, also one started detached by another process. */
export interface ContainerdProcess {
  readonly pid: number
  /** Its ContainerdOptions.dir. */
  readonly dir: string
  /** Its ctr binary. */
  readonly ctr: string
}

/** Kills and removes every task and container kubelet left behind, then stops containerd. */
export async function stopContainerd({ctr: ctrBinary, dir, pid}: ContainerdProcess, child?: ChildProcess): Promise<void> {
  const socket = socketOf(dir)
  const call = (...args: string[]): Promise<string> => ctr(ctrBinary, socket, ...args)
  const ids = await call('-n', 'k8s.io', 'containers', 'ls', '-q').then(
    (out) => out.split('\n').filter(Boolean),
    () => [],
  )
  for (const id of ids) await call('-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', id).catch(() => {})
  for (const id of ids) {
    await waitFor(
      `task ${id} to stop`,
      async () => {
        await call('-n', 'k8s.io', 'tasks', 'rm', '-f', id).catch(() => {})
        return !(await call('-n', 'k8s.io', 'tasks', 'ls', '-q')).split('\n').includes(id)
      },
      {timeoutMs: 10_000},
    ).catch(() => {})
    await call('-n', 'k8s.io', 'containers', 'rm', id).catch(() => {})
  }
  await terminate(pid, child)
}

const socketOf = (dir: string): string => join(dir, 'run', 'containerd.sock')

/** containerd refuses a shim socket directory longer than this (core/runtime/v2/socket_linux.go). */
const maxShimSocketDirLength = 42

/**
 * Where the shims put their sockets: below the node's directory when its path is short enough, otherwise a
 * directory in /tmp named after it (HostChanges owns it for the run).
 */
export function shimSocketDirOf(dir: string): string {
  const inside = join(dir, 's')
  return inside.length <= maxShimSocketDirLength ? inside : `/tmp/nfdctl-shims-${createHash('sha256').update(dir).digest('hex').slice(0, 12)}`
}

/** Debian's runc: an absolute path, as containerd's PATH may lack the sbin directories. */
function findRunc(): string {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/local/sbin', '/usr/sbin', '/sbin']
  for (const dir of dirs) {
    try {
      accessSync(join(dir, 'runc'), constants.X_OK)
      return join(dir, 'runc')
    } catch {}
  }
  throw new Error('runc is not installed (apt-get install runc)')
}

async function ctr(binary: string, socket: string, ...args: string[]): Promise<string> {
  const {stdout} = await run(binary, ['--address', socket, ...args], {maxBuffer: 16 * 1024 * 1024})
  return stdout
}

interface ConfigPaths {
  readonly dir: string
  readonly cdiDir: string
  readonly runc: string
  readonly shim: string
  readonly shimSocketDir: string
}

// Version 3 (containerd 2.0-2.4 read it; 2.4 migrates it to 4 in memory and logs so). enable_cdi is gone in
// 2.4 (CDI is always on); cdi_spec_dirs alone decides where the CRI plugin looks.
function configToml({cdiDir, dir, runc, shim, shimSocketDir}: ConfigPaths): string {
  return `version = 3
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "${dir}/run/containerd.sock"
[ttrpc]
  address = "${dir}/run/containerd.sock.ttrpc"
[debug]
  address = "${dir}/run/debug.sock"
[plugins.'io.containerd.internal.v1.opt']
  path = "${dir}/opt"
[plugins.'io.containerd.shim.v1.manager']
  socket_dir = "${shimSocketDir}"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${busyboxImage}"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["${cdiDir}"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "${shim}"
      # Device-plugin annotations reach the OCI spec only through this allow-list (as on a node set up for them).
      container_annotations = ["classes.devices.nfdctl.io/*"]
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "${runc}"
        Root = "${dir}/runc-root"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${dir}/cni/net.d"
`
}
