import {chmodSync, chownSync, closeSync, fstatSync} from 'node:fs'

import {errno, errnoText, sys} from './libc.js'
import {openEntry, openParent, type ParentDir, PathInsideError, type RootDir, statEntry, withRoot} from './path-inside.js'

// Device nodes in a container's own /dev, made and removed only through path-inside.ts's resolution, so
// nothing is written through a symlink, on another mount, or in a /dev that is not the container's.

const S_IFCHR = 0o020_000
const S_IFBLK = 0o060_000

export interface DeviceNodeSpec {
  /** Absolute path inside the root, under /dev: /dev/ttyUSB0, /dev/input/event3. */
  readonly path: string
  readonly type: 'block' | 'char'
  readonly major: number
  readonly minor: number
  /** Permission bits, e.g. 0o660. */
  readonly mode: number
  readonly uid: number
  readonly gid: number
}

/** glibc's makedev(). */
function makedev(major: number, minor: number): bigint {
  const ma = BigInt(major)
  const mi = BigInt(minor)
  return ((ma & 0xfffff000n) << 32n) | ((ma & 0xfffn) << 8n) | ((mi & 0xffffff00n) << 12n) | (mi & 0xffn)
}

/**
 * Creates a device node at `spec.path` under the root's /dev with exactly the type, numbers, mode and owner
 * asked for, creating parent directories; an existing node with other numbers is replaced. Anything else
 * in the way (a file, a symlink, a directory, a mount) is an error: it belongs to the container. So is a
 * /dev that is not the container's own, or a path through another mount: nothing is written there.
 * Returns false when the node was already there as asked.
 */
export function createDeviceNode(root: RootDir | string, spec: DeviceNodeSpec): boolean {
  return withRoot(root, (r) => {
    const parent = openParent(r, spec.path, true)
    const {fd, name} = parent
    try {
      const existing = statEntry(r, parent, name)
      if (existing === 'mount') throw new PathInsideError(`${spec.path} in ${r.name} is a mount point (a volume?); nothing is written there`, 'outside')
      if (existing !== undefined) {
        const isNode = spec.type === 'block' ? existing.isBlockDevice() : existing.isCharacterDevice()
        const sameNumbers = BigInt(existing.rdev) === makedev(spec.major, spec.minor)
        if (isNode && sameNumbers && (existing.mode & 0o7777) === spec.mode && existing.uid === spec.uid && existing.gid === spec.gid) return false
        if (!existing.isBlockDevice() && !existing.isCharacterDevice()) throw new PathInsideError(`${spec.path} in ${r.name} exists and is not a device node; left alone`)
        if ((sys.unlinkat(fd, name, 0) as number) < 0) throw new PathInsideError(`cannot replace ${spec.path} in ${r.name}: ${errnoText(errno())}`)
      }
      const type = spec.type === 'block' ? S_IFBLK : S_IFCHR
      if ((sys.mknodat(fd, name, type | 0o600, makedev(spec.major, spec.minor)) as number) < 0) throw new PathInsideError(`cannot create ${spec.path} in ${r.name}: ${errnoText(errno())}`)
      // Mode and owner through the node's own O_PATH fd: exact (no umask), and nothing re-resolves the name.
      const nodeFd = openEntry(r, parent, name)
      if (nodeFd < 0) throw new PathInsideError(`cannot open the new ${spec.path} in ${r.name}: ${errnoText(-nodeFd)}`)
      try {
        const created = fstatSync(nodeFd)
        if (!(spec.type === 'block' ? created.isBlockDevice() : created.isCharacterDevice())) throw new PathInsideError(`${spec.path} in ${r.name} was replaced while being created`)
        chownSync(`/proc/self/fd/${nodeFd}`, spec.uid, spec.gid)
        chmodSync(`/proc/self/fd/${nodeFd}`, spec.mode)
      } finally {
        closeSync(nodeFd)
      }
      return true
    } finally {
      sys.close(fd)
    }
  })
}

/**
 * Removes the device node at `path` under the root's /dev when it is a node of these numbers; anything
 * else there is left alone, and so is anything behind another mount (nothing the agent made can be
 * there, nor through a symlink). Returns false when there was nothing to remove.
 */
export function removeDeviceNode(root: RootDir | string, path: string, major: number, minor: number): boolean {
  return withRoot(root, (r) => {
    let parent: ParentDir
    try {
      parent = openParent(r, path, false)
    } catch (error) {
      if (error instanceof PathInsideError && error.reason !== 'refused') return false
      throw error
    }
    try {
      const existing = statEntry(r, parent, parent.name)
      if (existing === undefined || existing === 'mount') return false
      if (!(existing.isBlockDevice() || existing.isCharacterDevice()) || BigInt(existing.rdev) !== makedev(major, minor)) return false
      if ((sys.unlinkat(parent.fd, parent.name, 0) as number) < 0) throw new PathInsideError(`cannot remove ${path} in ${r.name}: ${errnoText(errno())}`)
      return true
    } finally {
      sys.close(parent.fd)
    }
  })
}
