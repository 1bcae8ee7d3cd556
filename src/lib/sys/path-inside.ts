import {chmodSync, chownSync, closeSync, fstatSync, type Stats} from 'node:fs'

import {errno, errnoText, sys} from './libc.js'

// openat(2) and friends, which Node lacks: paths inside a container's root are walked one component at a
// time from a directory fd, never following a symlink, so that nothing the container put in its /dev
// (a symlink to /etc, say) can send a write outside its root.

const O_PATH = 0o10_000_000
const O_DIRECTORY = 0o200_000
const O_NOFOLLOW = 0o400_000
const O_CLOEXEC = 0o2_000_000
const S_IFCHR = 0o020_000
const S_IFBLK = 0o060_000
const ENOENT = 2
const EEXIST = 17

export interface DeviceNodeSpec {
  /** Absolute path inside the root, e.g. /dev/ttyUSB0 or /dev/input/event3. */
  readonly path: string
  readonly type: 'block' | 'char'
  readonly major: number
  readonly minor: number
  /** Permission bits, e.g. 0o660. */
  readonly mode: number
  readonly uid: number
  readonly gid: number
}

export class PathInsideError extends Error {}

/** glibc's makedev(). */
function makedev(major: number, minor: number): bigint {
  const ma = BigInt(major)
  const mi = BigInt(minor)
  return ((ma & 0xfffff000n) << 32n) | ((ma & 0xfffn) << 8n) | ((mi & 0xffffff00n) << 12n) | (mi & 0xffn)
}

function components(path: string): string[] {
  if (!path.startsWith('/')) throw new PathInsideError(`${path}: must be an absolute path`)
  const parts = path.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw new PathInsideError(`${path}: ".." is not allowed`)
  if (parts.length === 0) throw new PathInsideError(`${path}: names no file`)
  return parts
}

/** Opens `root` (e.g. /proc/<pid>/root) and walks to the parent directory of `path`, creating directories when asked. */
function openParent(root: string, path: string, create: boolean): {fd: number; name: string} {
  const parts = components(path)
  let fd = sys.open(root, O_PATH | O_DIRECTORY | O_CLOEXEC) as number
  if (fd < 0) throw new PathInsideError(`cannot open ${root}: ${errnoText(errno())}`)
  try {
    let walked = ''
    for (const part of parts.slice(0, -1)) {
      walked += `/${part}`
      let next = sys.openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0) as number
      if (next < 0 && errno() === ENOENT && create) {
        if ((sys.mkdirat(fd, part, 0o755) as number) < 0 && errno() !== EEXIST) throw new PathInsideError(`cannot create ${walked} in ${root}: ${errnoText(errno())}`)
        next = sys.openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0) as number
      }
      if (next < 0) {
        const code = errno()
        throw new PathInsideError(code === ENOENT ? `${walked} does not exist in ${root}` : `${walked} in ${root} is not a plain directory (${errnoText(code)}); a symlink is never followed`)
      }
      sys.close(fd)
      fd = next
    }
    return {fd, name: parts.at(-1)!}
  } catch (error) {
    sys.close(fd)
    throw error
  }
}

/** stat of the entry itself (not what a symlink points to), or undefined when there is none. */
function statEntry(dirFd: number, name: string): Stats | undefined {
  const fd = sys.openat(dirFd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) as number
  if (fd < 0) return undefined
  try {
    return fstatSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Creates a device node at `spec.path` inside `root` with exactly the type, numbers, mode and owner asked
 * for, creating parent directories; an existing node with other numbers is replaced. Anything else in the
 * way (a file, a symlink, a directory) is an error: it belongs to the container.
 * Returns false when the node was already there as asked.
 */
export function createDeviceNode(root: string, spec: DeviceNodeSpec): boolean {
  const {fd, name} = openParent(root, spec.path, true)
  try {
    const existing = statEntry(fd, name)
    if (existing !== undefined) {
      const isNode = spec.type === 'block' ? existing.isBlockDevice() : existing.isCharacterDevice()
      const sameNumbers = BigInt(existing.rdev) === makedev(spec.major, spec.minor)
      if (isNode && sameNumbers && (existing.mode & 0o7777) === spec.mode && existing.uid === spec.uid && existing.gid === spec.gid) return false
      if (!existing.isBlockDevice() && !existing.isCharacterDevice()) throw new PathInsideError(`${spec.path} in ${root} exists and is not a device node; left alone`)
      if ((sys.unlinkat(fd, name, 0) as number) < 0) throw new PathInsideError(`cannot replace ${spec.path} in ${root}: ${errnoText(errno())}`)
    }
    const type = spec.type === 'block' ? S_IFBLK : S_IFCHR
    if ((sys.mknodat(fd, name, type | 0o600, makedev(spec.major, spec.minor)) as number) < 0) throw new PathInsideError(`cannot create ${spec.path} in ${root}: ${errnoText(errno())}`)
    // Mode and owner through the node's own O_PATH fd: exact (no umask), and nothing re-resolves the name.
    const nodeFd = sys.openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) as number
    if (nodeFd < 0) throw new PathInsideError(`cannot open the new ${spec.path} in ${root}: ${errnoText(errno())}`)
    try {
      const created = fstatSync(nodeFd)
      if (!(spec.type === 'block' ? created.isBlockDevice() : created.isCharacterDevice())) throw new PathInsideError(`${spec.path} in ${root} was replaced while being created`)
      chownSync(`/proc/self/fd/${nodeFd}`, spec.uid, spec.gid)
      chmodSync(`/proc/self/fd/${nodeFd}`, spec.mode)
    } finally {
      closeSync(nodeFd)
    }
    return true
  } finally {
    sys.close(fd)
  }
}

/**
 * Removes the device node at `path` inside `root` when it is a node of these numbers; anything else there
 * is left alone. Returns false when there was nothing to remove.
 */
export function removeDeviceNode(root: string, path: string, major: number, minor: number): boolean {
  let parent: {fd: number; name: string}
  try {
    parent = openParent(root, path, false)
  } catch (error) {
    if (error instanceof PathInsideError && error.message.includes('does not exist')) return false
    throw error
  }
  try {
    const existing = statEntry(parent.fd, parent.name)
    if (existing === undefined) return false
    if (!(existing.isBlockDevice() || existing.isCharacterDevice()) || BigInt(existing.rdev) !== makedev(major, minor)) return false
    if ((sys.unlinkat(parent.fd, parent.name, 0) as number) < 0) throw new PathInsideError(`cannot remove ${path} in ${root}: ${errnoText(errno())}`)
    return true
  } finally {
    sys.close(parent.fd)
  }
}
