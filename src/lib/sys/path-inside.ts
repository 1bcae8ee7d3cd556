import {closeSync, fstatSync, readFileSync, statfsSync, type Stats} from 'node:fs'

import {ownString} from '../own-string.js'
import {errno, errnoText, sys} from './libc.js'

// Paths inside a container's /dev, resolved relative to a root directory fd and never through a symlink
// or into another mount: /dev must be the container's own (its root filesystem, or a tmpfs no host mount
// shares), and below it every step stays on that mount, so that neither a symlink the container made (to
// /etc, say) nor a volume mounted at /dev/input sends a write outside the container (device-nodes.ts
// writes through it). openat2(2) (Linux 5.6) refuses such steps in the kernel; without it each step is
// opened with openat(2) and its mount id compared with /dev's.

const O_PATH = 0o10_000_000
const O_DIRECTORY = 0o200_000
const O_NOFOLLOW = 0o400_000
const O_CLOEXEC = 0o2_000_000
const AT_FDCWD = -100
const AT_EMPTY_PATH = 0x1000
const EPERM = 1
const ENOENT = 2
const EEXIST = 17
const EXDEV = 18
const ENOSYS = 38
const resolve = {beneath: 0x08, noMagicLinks: 0x02, noSymlinks: 0x04, noXdev: 0x01} as const
/** openat2 is 437 on every architecture (the shared syscall table from Linux 5.1 on); statx is not. */
const sysOpenat2 = 437
const sysStatx = process.arch === 'arm64' ? 291 : 332
const STATX_MNT_ID = 0x1000
const TMPFS_MAGIC = 0x0102_1994
const filesystemNames: Record<number, string> = {
  0x0102_1994: 'tmpfs',
  0x5846_5342: 'xfs',
  0x794c_7630: 'overlay',
  0x9123_683e: 'btrfs',
  0xef53: 'ext4',
  0x6969: 'nfs',
  0x6573_5546: 'fuse',
}

/** A root directory held open (a container's /proc/<pid>/root), which device node paths are resolved beneath. */
export interface RootDir {
  /** O_PATH directory fd. */
  readonly fd: number
  /** How messages name it. */
  readonly name: string
  /** Whether steps are resolved with openat2(2); false where the kernel lacks it. */
  readonly openat2: boolean
  /**
   * The verdict on /dev (foreignDev) for the mount it was: one handle makes several nodes, and the verdict
   * reads the host's whole mount table.
   */
  devVerdict?: {readonly mount: bigint; readonly foreign: string | undefined}
}

/** The host's mount table (init's: the agent runs in the host's PID namespace). A /dev whose filesystem the host has mounted is a volume, not the container's own. */
const hostMountInfo = '/proc/1/mountinfo'

export interface OpenRootOptions {
  /** false: openat(2) and mount ids, as on a kernel without openat2 (so that path is tested too). */
  readonly openat2?: boolean
}

/**
 * Why a path inside a root was refused: missing (nothing there), outside (it leads out of the container's
 * own /dev: another mount, a symlink, a /dev that is not its own), refused (anything else).
 */
export type PathInsideReason = 'missing' | 'outside' | 'refused'

export class PathInsideError extends Error {
  constructor(
    message: string,
    readonly reason: PathInsideReason = 'refused',
  ) {
    super(message)
  }
}

/** glibc's major() and minor(), as mountinfo writes them. */
export function majorMinor(dev: bigint): string {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn)
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn)
  return `${major}:${minor}`
}

function components(path: string): string[] {
  if (!path.startsWith('/')) throw new PathInsideError(`${path}: must be an absolute path`)
  const parts = path.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw new PathInsideError(`${path}: ".." is not allowed`)
  if (parts.length < 2 || parts[0] !== 'dev') throw new PathInsideError(`${path}: device nodes go under /dev only`)
  return parts
}

/** openat2(2); the fd, or minus errno. */
function openat2(dirFd: number, path: string, flags: number, resolveFlags: number): number {
  const how = Buffer.alloc(24) // struct open_how {u64 flags; u64 mode; u64 resolve}
  how.writeBigUInt64LE(BigInt(flags), 0)
  how.writeBigUInt64LE(BigInt(resolveFlags), 16)
  const fd = Number(sys.syscall(sysOpenat2, 'int', dirFd, 'const char *', path, 'void *', how, 'size_t', how.length))
  return fd < 0 ? -errno() : fd
}

/**
 * Opens the root directory at `path` (/proc/<pid>/root: a magic link, followed on purpose). Close it with
 * closeRoot. Where openat2 is missing (ENOSYS; EPERM from a seccomp filter) the walk uses mount ids.
 */
export function openRoot(path: string, options: OpenRootOptions = {}): RootDir {
  const flags = O_PATH | O_DIRECTORY | O_CLOEXEC
  let usable = options.openat2 ?? true
  let fd = -1
  let code = 0
  if (usable) {
    fd = openat2(AT_FDCWD, path, flags, 0)
    if (fd < 0 && (-fd === ENOSYS || -fd === EPERM)) usable = false
    else if (fd < 0) code = -fd
  }
  if (!usable) {
    fd = sys.open(path, flags) as number
    if (fd < 0) code = errno()
  }
  if (fd < 0) throw new PathInsideError(`cannot open ${path}: ${errnoText(code)}`, code === ENOENT ? 'missing' : 'refused')
  return {fd, name: path, openat2: usable}
}

export function closeRoot(root: RootDir): void {
  sys.close(root.fd)
}

/** Runs `work` on `root`, or on the root opened at that path and closed after. */
export function withRoot<T>(root: RootDir | string, work: (root: RootDir) => T): T {
  if (typeof root !== 'string') return work(root)
  const opened = openRoot(root)
  try {
    return work(opened)
  } finally {
    closeRoot(opened)
  }
}

/** The mount id of an fd (mountinfo's first field): statx (Linux 5.8), else the fd's fdinfo. */
export function mountIdOf(fd: number): bigint {
  const buffer = Buffer.alloc(256) // struct statx
  const result = Number(sys.syscall(sysStatx, 'int', fd, 'const char *', '', 'int', AT_EMPTY_PATH, 'unsigned int', STATX_MNT_ID, 'void *', buffer))
  if (result === 0 && (buffer.readUInt32LE(0) & STATX_MNT_ID) !== 0) return buffer.readBigUInt64LE(144)
  const id = /^mnt_id:\s*(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1]
  if (id === undefined) throw new PathInsideError(`cannot tell the mount of fd ${fd}: no statx mount id and no mnt_id in /proc/self/fdinfo`)
  return BigInt(id)
}

/**
 * Opens `name` in `dirFd` as an O_PATH fd without following a symlink; below /dev (`sameMount`) also
 * without leaving dirFd's mount (EXDEV). The fd, or minus errno. A trailing symlink opens as itself.
 */
function openStep(root: RootDir, dirFd: number, name: string, flags: number, sameMount: bigint | 'any' | 'kernel'): number {
  const all = flags | O_PATH | O_NOFOLLOW | O_CLOEXEC
  if (root.openat2) return openat2(dirFd, name, all, resolve.beneath | resolve.noSymlinks | resolve.noMagicLinks | (sameMount === 'any' ? 0 : resolve.noXdev))
  const fd = sys.openat(dirFd, name, all, 0) as number
  if (fd < 0) return -errno()
  if (typeof sameMount === 'bigint' && mountIdOf(fd) !== sameMount) {
    sys.close(fd)
    return -EXDEV
  }
  return fd
}

/**
 * Why the /dev open as `devFd` is not the container's own, or undefined when it is: part of the root's
 * filesystem, or a tmpfs mounted nowhere on the host (runc's). A volume or the host's /dev shares a
 * filesystem with a host mount.
 */
function foreignDev(root: RootDir, devFd: number, devMount: bigint): string | undefined {
  if (root.devVerdict?.mount === devMount) return root.devVerdict.foreign
  const foreign = judgeDev(root, devFd, devMount)
  root.devVerdict = {foreign, mount: devMount}
  return foreign
}

function judgeDev(root: RootDir, devFd: number, devMount: bigint): string | undefined {
  if (devMount === mountIdOf(root.fd)) return undefined
  const type = statfsSync(`/proc/self/fd/${devFd}`).type
  if (type !== TMPFS_MAGIC) return `it is a mount of ${filesystemNames[type] ?? `filesystem type 0x${type.toString(16)}`}, not a tmpfs`
  const dev = majorMinor(fstatSync(devFd, {bigint: true}).dev)
  let table: string
  try {
    table = readFileSync(hostMountInfo, 'utf8')
  } catch (error) {
    return `the host's mount table ${hostMountInfo} cannot be read (${(error as Error).message}) to tell it from a volume`
  }
  const shared = table
    .split('\n')
    .map((line) => line.split(' '))
    .find((fields) => fields[2] === dev)
  if (shared !== undefined) return `its filesystem (${dev}) is the host's ${unescapeMountPath(shared[4])} (a volume or the host's /dev)`
  return undefined
}

/**
 * mountinfo and /proc/swaps write space, tab, newline and backslash as octal escapes. The path is a string of
 * its own, not a slice of the table, which callers keep per container and per host-critical reason.
 */
export function unescapeMountPath(path: string): string {
  return ownString(path.replaceAll(/\\([0-7]{3})/g, (_, octal: string) => String.fromCodePoint(Number.parseInt(octal, 8))))
}

/** The directory a path's last component is in, opened beneath the root; its fd is the caller's to close. */
export interface ParentDir {
  readonly fd: number
  /** The last component. */
  readonly name: string
  /** /dev's mount id, for openStep without openat2. */
  readonly mount: bigint | 'kernel'
}

/** Walks from the root to the parent directory of `path` under /dev, creating directories when asked. */
export function openParent(root: RootDir, path: string, create: boolean): ParentDir {
  const parts = components(path)
  let fd = openStep(root, root.fd, 'dev', O_DIRECTORY, 'any')
  if (fd < 0) {
    const code = -fd
    throw code === ENOENT
      ? new PathInsideError(`/dev does not exist in ${root.name}`, 'missing')
      : new PathInsideError(`/dev in ${root.name} is not a plain directory (${errnoText(code)}); a symlink is never followed`, 'outside')
  }
  try {
    const devMount = mountIdOf(fd)
    const foreign = foreignDev(root, fd, devMount)
    if (foreign !== undefined) throw new PathInsideError(`/dev in ${root.name} is not the container's own: ${foreign}; nothing is written there`, 'outside')
    const mount = root.openat2 ? 'kernel' : devMount
    let walked = '/dev'
    for (const part of parts.slice(1, -1)) {
      walked += `/${part}`
      let next = openStep(root, fd, part, O_DIRECTORY, mount)
      if (next === -ENOENT && create) {
        if ((sys.mkdirat(fd, part, 0o755) as number) < 0 && errno() !== EEXIST) throw new PathInsideError(`cannot create ${walked} in ${root.name}: ${errnoText(errno())}`)
        next = openStep(root, fd, part, O_DIRECTORY, mount)
      }
      if (next < 0) {
        const code = -next
        if (code === ENOENT) throw new PathInsideError(`${walked} does not exist in ${root.name}`, 'missing')
        if (code === EXDEV) throw new PathInsideError(`${walked} in ${root.name} is another mount (a volume?), not the container's /dev; nothing is written there`, 'outside')
        throw new PathInsideError(`${walked} in ${root.name} is not a plain directory (${errnoText(code)}); a symlink is never followed`, 'outside')
      }
      sys.close(fd)
      fd = next
    }
    return {fd, mount, name: parts.at(-1)!}
  } catch (error) {
    sys.close(fd)
    throw error
  }
}

/** Opens the entry `name` in `parent` itself (a symlink as itself) as an O_PATH fd on /dev's mount; the fd, or minus errno. */
export function openEntry(root: RootDir, parent: ParentDir, name: string): number {
  return openStep(root, parent.fd, name, 0, parent.mount)
}

/** stat of the entry itself (not what a symlink points to); undefined when there is none, 'mount' when something is mounted on it. */
export function statEntry(root: RootDir, parent: ParentDir, name: string): Stats | 'mount' | undefined {
  const fd = openEntry(root, parent, name)
  if (fd === -EXDEV) return 'mount'
  if (fd < 0) return undefined
  try {
    return fstatSync(fd)
  } finally {
    closeSync(fd)
  }
}
