import {execFile} from 'node:child_process'
import {lstat, mkdir, readdir, readFile, readlink, rename, rm, rmdir, symlink, unlink, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import {promisify} from 'node:util'

const run = promisify(execFile)

/** kubelet's device-plugin directory is a constant in kubelet, not under --root-dir. */
export const kubeletPluginDir = '/var/lib/kubelet/device-plugins'

/** kubelet sets these at start (kubelet/cm); the host gets its own values back. */
const kubeletSysctls = ['vm.overcommit_memory', 'kernel.panic', 'kernel.panic_on_oops', 'vm.panic_on_oom']

/** Directories kubelet creates on the host when they are absent; everything in them is then the node's. */
const hostDirs = ['/var/log/containers', '/var/lib/kubelet']

/**
 * Where a containerd on its defaults keeps sockets, shim sockets, runc state and exec fifos, and where NRI
 * listens: the node's containerd config and its `ctr` calls keep all of that below the node's directory, so a
 * run must not make any of them.
 */
const runtimeDefaultDirs = ['/run/containerd', '/run/nri']

interface ChangeRecord {
  readonly dir: string
  readonly pluginDirTarget: string
  /** Where a device-plugin directory that was there before was moved, to be moved back. */
  readonly savedPluginDir?: string
  readonly sysctls: Readonly<{[name: string]: string}>
  readonly absentDirs: readonly string[]
  /** runtimeDefaultDirs absent before the run: still absent after it, or something escaped the node's directory. */
  readonly untouchedDirs?: readonly string[]
  /** Directories outside `dir` that the node owns for the run (shim sockets when `dir` is too deep for them). */
  readonly ownDirs?: readonly string[]
  readonly cgroups: readonly string[]
}

/**
 * Everything a test node changes on the host, recorded in `<dir>/host-changes.json` before it is changed, so
 * that teardown (also `npm run node:down` from another process) puts the host back: the device-plugin
 * directory (owned by the harness for the run, as one node test runs at a time), kubelet's sysctls, the
 * private cgroup parent, the mounts below the node's directory, and directories kubelet creates.
 */
export class HostChanges {
  private constructor(readonly record: ChangeRecord) {}

  /**
   * `linkPluginDir` false: the node's device-plugin directory is made but not linked at kubelet's path (a
   * second node mounts it there in its own mount namespace; the first node's link stays as it is).
   */
  static async apply(dir: string, cgroupRoot: string, ownDirs: readonly string[] = [], linkPluginDir = true): Promise<HostChanges> {
    const sysctls: {[name: string]: string} = {}
    for (const name of kubeletSysctls) sysctls[name] = (await readFile(sysctlPath(name), 'utf8')).trim()
    const absentDirs: string[] = []
    for (const d of hostDirs) if (!(await exists(d))) absentDirs.push(d)
    const untouchedDirs: string[] = []
    for (const d of runtimeDefaultDirs) if (!(await exists(d))) untouchedDirs.push(d)
    const pluginDirTarget = join(dir, 'device-plugins')
    const savedPluginDir = linkPluginDir && (await exists(kubeletPluginDir)) ? `${kubeletPluginDir}.nfdctl-saved-${process.pid}` : undefined
    const cgroups = await cgroupDirs(cgroupRoot)
    const changes = new HostChanges({absentDirs, cgroups, dir, ownDirs, pluginDirTarget, savedPluginDir, sysctls, untouchedDirs})
    await writeFile(join(dir, 'host-changes.json'), JSON.stringify(changes.record))

    for (const d of ownDirs) await mkdir(d, {mode: 0o700, recursive: true})
    await mkdir(pluginDirTarget, {recursive: true})
    if (linkPluginDir) {
      await mkdir(dirname(kubeletPluginDir), {recursive: true})
      if (savedPluginDir !== undefined) await rename(kubeletPluginDir, savedPluginDir)
      await symlink(pluginDirTarget, kubeletPluginDir)
    }
    for (const cgroup of cgroups) await makeCgroup(cgroup)
    return changes
  }

  static async load(dir: string): Promise<HostChanges | undefined> {
    try {
      return new HostChanges(JSON.parse(await readFile(join(dir, 'host-changes.json'), 'utf8')) as ChangeRecord)
    } catch {
      return undefined
    }
  }

  /** Undoes everything; every step is tried even when one fails, and the failures are thrown together. */
  async restore(): Promise<void> {
    const {absentDirs, cgroups, dir, ownDirs = [], pluginDirTarget, savedPluginDir, sysctls} = this.record
    const failures: string[] = []
    const attempt = async (what: string, step: () => Promise<unknown>): Promise<void> => {
      try {
        await step()
      } catch (error) {
        failures.push(`${what}: ${(error as Error).message}`)
      }
    }
    await attempt('unmount', () => unmountBelow(dir))
    for (const cgroup of cgroups) await attempt(`remove cgroup ${cgroup}`, () => removeCgroupTree(cgroup))
    await attempt('device-plugin directory', async () => {
      if ((await lstat(kubeletPluginDir).catch(() => undefined))?.isSymbolicLink() && (await readlink(kubeletPluginDir)) === pluginDirTarget) await unlink(kubeletPluginDir)
      if (savedPluginDir !== undefined && (await exists(savedPluginDir))) await rename(savedPluginDir, kubeletPluginDir)
    })
    for (const [name, value] of Object.entries(sysctls)) await attempt(`sysctl ${name}`, () => writeFile(sysctlPath(name), value))
    // Absent before the run, so everything in them is the node's: pod log links, the plugin dir link.
    for (const d of [...absentDirs, ...ownDirs]) await attempt(`remove ${d}`, () => rm(d, {force: true, recursive: true}))
    if (failures.length > 0) throw new Error(`the host was not fully restored: ${failures.join('; ')}`)
  }

  /** What is still left on the host (empty when restore() did its job), for tests and node:down. */
  async leftovers(): Promise<string[]> {
    const left: string[] = []
    const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').filter((l) => l.split(' ')[1]?.startsWith(this.record.dir))
    if (mounts.length > 0) left.push(`${mounts.length} mounts below ${this.record.dir}`)
    for (const cgroup of this.record.cgroups) if (await exists(cgroup)) left.push(`cgroup ${cgroup}`)
    for (const d of [...this.record.absentDirs, ...(this.record.ownDirs ?? [])]) if (await exists(d)) left.push(d)
    for (const d of this.record.untouchedDirs ?? []) if (await exists(d)) left.push(`${d} (made during the run: the node's runtime should keep everything below ${this.record.dir})`)
    if ((await lstat(kubeletPluginDir).catch(() => undefined))?.isSymbolicLink() && (await readlink(kubeletPluginDir)) === this.record.pluginDirTarget) left.push(kubeletPluginDir)
    for (const [name, value] of Object.entries(this.record.sysctls)) {
      const now = (await readFile(sysctlPath(name), 'utf8')).trim()
      if (now !== value) left.push(`${name}=${now} (was ${value})`)
    }
    return left
  }
}

const sysctlPath = (name: string): string => `/proc/sys/${name.replaceAll('.', '/')}`

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined
}

/** The cgroup parent in every mounted hierarchy: each v1 controller (and name=systemd) and the cgroup2 one. */
async function cgroupDirs(cgroupRoot: string): Promise<string[]> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8'))
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || f[2] === 'cgroup2')
  return mounts.map((f) => join(f[1], cgroupRoot))
}

async function makeCgroup(path: string): Promise<void> {
  await mkdir(path, {recursive: true})
  // A new v1 cpuset cgroup has no CPUs or memory nodes: nothing can join it until they are copied.
  if (await exists(join(path, 'cpuset.cpus'))) {
    for (const file of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(path, file), await readFile(join(dirname(path), file)))
  }
}

/** cgroup directories are removed with rmdir, children first, once their processes are gone. */
async function removeCgroupTree(path: string): Promise<void> {
  if (!(await exists(path))) return
  for (const entry of await readdir(path, {withFileTypes: true})) if (entry.isDirectory()) await removeCgroupTree(join(path, entry.name))
  for (let attempt = 0; ; attempt++) {
    try {
      await rmdir(path)
      return
    } catch (error) {
      // EBUSY while the last process of a killed container is still exiting.
      if ((error as NodeJS.ErrnoException).code !== 'EBUSY' || attempt >= 50) throw error
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}

/** kubelet bind-mounts its root dir onto itself; pod volumes, shm, overlays and netns files sit below it. */
async function unmountBelow(dir: string): Promise<void> {
  const mounts = (await readFile('/proc/self/mounts', 'utf8'))
    .split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m): m is string => m !== undefined && (m === dir || m.startsWith(`${dir}/`)))
  for (const mount of mounts.sort().reverse()) {
    await run('umount', [mount]).catch(() => run('umount', ['-l', mount]))
  }
}
