import {unescapeMountPath} from '../sys/path-inside.js'
import type {Device, DeviceClass} from './types.js'

/**
 * Host-critical devices: whoever holds one has the node. The mem subsystem's /dev/mem, /dev/kmem, /dev/port
 * and /dev/kmsg (character major 1; its other members, null, zero, full, random and urandom, are harmless),
 * and the block devices the node itself uses: those that back a mount or swap, and those below them (the
 * disk of a mounted partition, the members of a mounted dm or md device). A class serves them only with
 * spec.hostCritical: Allow. Pure: the node's part comes in as data (host-mounts.ts reads it).
 */
const criticalMem = new Map<number, string>([
  [1, "/dev/mem is the node's physical memory"],
  [2, "/dev/kmem is the kernel's memory"],
  [4, "/dev/port is the node's I/O ports"],
  [11, "/dev/kmsg is the kernel's log (read it all, write lines into it)"],
])

/** The block devices the node uses, by device id (`b8:1`), each with why. */
export interface NodeBlockUse {
  readonly block: ReadonlyMap<string, string>
}

/** Whether two readings say the same of every block device. */
export function sameBlockUse(a: NodeBlockUse, b: NodeBlockUse): boolean {
  return a.block.size === b.block.size && [...a.block].every(([id, why]) => b.block.get(id) === why)
}

/** Why the device is host-critical on this node, or undefined when it is not. */
export function hostCriticalReason(device: Device, node: NodeBlockUse): string | undefined {
  if (device.type === 'char') return device.major === 1 ? criticalMem.get(device.minor) : undefined
  return node.block.get(device.id)
}

/** Whether a class serves host-critical devices. */
const allowsHostCritical = (spec: {readonly hostCritical?: string}): boolean => spec.hostCritical === 'Allow'

/**
 * ClassMembers' `refuse` for host-critical devices: the device is left out of a class without
 * `hostCritical: Allow` when `reasonFor` (host-mounts.ts, or a fixed set in tests) says it is critical here.
 */
export function hostCriticalRefusal(device: Device, deviceClass: DeviceClass, reasonFor: (device: Device) => string | undefined): {reason: 'HostCritical'; message: string} | undefined {
  if (allowsHostCritical(deviceClass.spec)) return undefined
  const why = reasonFor(device)
  return why === undefined ? undefined : {message: `${why}; set spec.hostCritical: Allow in the class to serve it`, reason: 'HostCritical'}
}

/** Of the classes a device matches, those that do not serve it as host-critical, each with why (for a caller that matches without ClassMembers). */
export function refusingClasses(device: Device, matched: readonly string[], classes: ReadonlyMap<string, DeviceClass>, reasonFor: (device: Device) => string | undefined): Map<string, string> {
  const refused = new Map<string, string>()
  for (const name of matched) {
    const deviceClass = classes.get(name)
    const refusal = deviceClass === undefined ? undefined : hostCriticalRefusal(device, deviceClass, reasonFor)
    if (refusal !== undefined) refused.set(name, refusal.message)
  }
  return refused
}

/** One line of /proc/<pid>/mountinfo: what is mounted where. */
export interface MountEntry {
  /** The mounted filesystem's device number, `major:minor` (0:N for filesystems without a block device). */
  readonly devNumber: string
  readonly mountPoint: string
  /** The mount source as the filesystem reports it: /dev/sda1, /dev/mapper/vg-root, tmpfs, … */
  readonly source: string
}

/** Parses /proc/<pid>/mountinfo (proc(5)): fields 3 and 5, and the source after the ` - ` separator. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = []
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    const separator = fields.indexOf('-', 6)
    if (separator < 0 || fields.length < separator + 3) continue
    entries.push({devNumber: fields[2], mountPoint: unescapeMountPath(fields[4]), source: unescapeMountPath(fields[separator + 2])})
  }
  return entries
}

/** Parses /proc/swaps: the swap areas' paths (devices, and files, whose filesystem is a mount already). */
export function parseSwaps(text: string): string[] {
  return text
    .split('\n')
    .slice(1)
    .map((line) => unescapeMountPath(line.split(/\s+/)[0] ?? ''))
    .filter((path) => path !== '')
}

/** The node's block devices as sysfs shows them (/sys/class/block). */
export interface BlockDeviceNode {
  /** Kernel name: sda1, dm-0, md0, nvme0n1p2. */
  readonly name: string
  /** `major:minor`. */
  readonly devNumber: string
  /** The devices it sits on: a partition's disk, a dm or md device's members (its `slaves`). */
  readonly below: readonly string[]
  /** A dm device's name, as /dev/mapper/<name> shows it. */
  readonly mapperName?: string
}

/**
 * The block devices that back the node's mounts and swap, and everything below them, by device id, each
 * with the mount (or swap) that makes it critical. A mount is found by its device number and by its source
 * (/dev/<kernel name> or /dev/mapper/<dm name>; btrfs reports an anonymous number): the reader resolves
 * links such as /dev/disk/by-uuid/… first.
 */
export function nodeBlockUse(mounts: readonly MountEntry[], swaps: readonly string[], devices: readonly BlockDeviceNode[]): NodeBlockUse {
  const byName = new Map(devices.map((d) => [d.name, d]))
  const byNumber = new Map(devices.map((d) => [d.devNumber, d]))
  const byMapper = new Map(devices.filter((d) => d.mapperName !== undefined).map((d) => [d.mapperName as string, d]))
  const fromPath = (path: string): BlockDeviceNode | undefined => {
    if (path.startsWith('/dev/mapper/')) return byMapper.get(path.slice('/dev/mapper/'.length))
    return path.startsWith('/dev/') ? byName.get(path.slice('/dev/'.length)) : undefined
  }
  const block = new Map<string, string>()
  // What sits under a used device is named after the used one: "/dev/sda is below /dev/dm-0, which backs …".
  const mark = (device: BlockDeviceNode | undefined, use: string, top?: string): void => {
    if (device === undefined || block.has(`b${device.devNumber}`)) return
    block.set(`b${device.devNumber}`, top === undefined ? `/dev/${device.name} ${use}` : `/dev/${device.name} is below /dev/${top}, which ${use}`)
    for (const name of device.below) mark(byName.get(name), use, top ?? device.name)
  }
  // The root first, then by depth: a device mounted in several places is named by its shallowest mount.
  const ordered = [...mounts].sort((a, b) => depth(a.mountPoint) - depth(b.mountPoint))
  for (const mount of ordered) {
    const use = `backs the node's mount ${mount.mountPoint}`
    mark(mount.devNumber.startsWith('0:') ? undefined : byNumber.get(mount.devNumber), use)
    mark(fromPath(mount.source), use)
  }
  for (const swap of swaps) mark(fromPath(swap), "is the node's swap")
  return {block}
}

const depth = (path: string): number => (path === '/' ? 0 : path.split('/').length)
