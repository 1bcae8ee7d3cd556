import {fstatSync, readFileSync} from 'node:fs'

import {errorMessage} from '../errors.js'
import {majorMinor, mountIdOf, unescapeMountPath} from '../sys/path-inside.js'

/** The host's mount table (init's: the agent runs in the host's PID namespace). */
const hostMountInfo = '/proc/1/mountinfo'

/** A container's root filesystem as the host has it mounted: where, and its device (`major:minor`). */
export interface ContainerRootfs {
  readonly mountPoint: string
  readonly dev: string
}

/**
 * Pure: a container's root filesystem in the host's mount table (mountinfo text). containerd's runc shim
 * mounts it at `<state>/io.containerd.runtime.v2.task/<namespace>/<id>/rootfs` in the host's mount namespace
 * (runtime v1: `io.containerd.runtime.v1.linux`), and runc makes that filesystem the container's root.
 * Undefined when there is none.
 */
export function rootfsMount(mountInfo: string, containerId: string): ContainerRootfs | undefined {
  const suffix = `/${containerId}/rootfs`
  for (const line of mountInfo.split('\n')) {
    const fields = line.split(' ')
    if (fields.length < 5) continue
    const path = unescapeMountPath(fields[4])
    if (path.endsWith(suffix) && /\/io\.containerd\.runtime\.(v2\.task|v1\.linux)\/[^/]+$/.test(path.slice(0, -suffix.length))) return {dev: fields[2], mountPoint: path}
  }
  return undefined
}

/**
 * Pure: whether mount `mountId` is the root of a process's mount table (its own /proc/<pid>/mountinfo, whose
 * mount points are relative to the process's root): mounted at `/`, with its filesystem's top as its root.
 * A process that changed its root to a directory inside a filesystem does not see that filesystem's mount
 * at all (its top is out of reach), and a bind mount of a subdirectory has that subdirectory as its root.
 */
export function isRootMount(mountInfo: string, mountId: bigint): boolean {
  return mountInfo.split('\n').some((line) => {
    const fields = line.split(' ')
    return fields[0] === String(mountId) && fields[3] === '/' && fields[4] === '/'
  })
}

/**
 * The container's rootfs as the host has it, or why it cannot be found. Read once per container: the host's
 * mount table waits for every mount and unmount on the node.
 */
function findContainerRootfs(containerId: string): ContainerRootfs | string {
  let table: string
  try {
    table = readFileSync(hostMountInfo, 'utf8')
  } catch (error) {
    return `the host's mount table ${hostMountInfo} cannot be read (${errorMessage(error)}) to find its rootfs`
  }
  return rootfsMount(table, containerId) ?? `the host's mount table has no rootfs of it (…/io.containerd.runtime.v2.task/<namespace>/${containerId}/rootfs)`
}

/**
 * Why the directory open as `rootFd` (process `pid`'s /proc/<pid>/root) is not the top of the container's
 * rootfs, or undefined when it is: on the rootfs's filesystem, and the root of the process's own mount table.
 * A process that changed its root (chroot into a volume, or into a directory of its image) fails one or the other.
 */
function rootfsMismatch(pid: number, rootFd: number, rootfs: ContainerRootfs): string | undefined {
  const dev = majorMinor(fstatSync(rootFd, {bigint: true}).dev)
  if (dev !== rootfs.dev) return `its root is on another filesystem (${dev}) than its rootfs ${rootfs.mountPoint} (${rootfs.dev}): its init process changed its root (chroot)`
  let table: string
  try {
    table = readFileSync(`/proc/${pid}/mountinfo`, 'utf8')
  } catch (error) {
    return `its mount table cannot be read (${errorMessage(error)}) to tell its root from a directory in its rootfs`
  }
  if (!isRootMount(table, mountIdOf(rootFd))) return `its root is a directory inside its rootfs ${rootfs.mountPoint}, not its top: its init process changed its root (chroot)`
  return undefined
}

/** What was found of a container's root: its rootfs on the host, and the verdict on the root directory judged. */
export interface RootVerdict {
  readonly rootfs: ContainerRootfs | string
  /** The directory judged (by device and inode) and why it is not the rootfs's top (undefined: it is). */
  readonly judged: {readonly dev: bigint; readonly ino: bigint; readonly problem: string | undefined}
}

/**
 * Judges the root open as `rootFd` (process `pid`'s). `earlier`, from a handle of the same container, spares
 * the mount tables (reading one waits for every mount and unmount on the node): the rootfs is found once per
 * container, and the same root directory gets the same verdict.
 */
export function judgeRoot(containerId: string, pid: number, rootFd: number, earlier?: RootVerdict): RootVerdict {
  const rootfs = earlier?.rootfs ?? findContainerRootfs(containerId)
  const {dev, ino} = fstatSync(rootFd, {bigint: true})
  if (earlier !== undefined && earlier.judged.dev === dev && earlier.judged.ino === ino) return {judged: earlier.judged, rootfs}
  return {judged: {dev, ino, problem: typeof rootfs === 'string' ? rootfs : rootfsMismatch(pid, rootFd, rootfs)}, rootfs}
}
