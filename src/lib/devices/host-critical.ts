import {unescapeMountPath} from '../sys/path-inside.js'
import type {Device, DeviceClass} from './types.js'

/**
 * Host-critical devices: whoever holds one has the node. The mem subsystem's /dev/mem, /dev/kmem, /dev/port
 * and /dev/kmsg (character major 1; its other members, null, zero, full, random and urandom, are harmless),
 * and the block devices the node itself uses: those that back a mount or swap, and those below them (the
 * disk of a mounted partition, the members of a mounted dm or md device), and the members of the storage
 * the kernel has assembled, mounted or not: of a dm device (an LVM volume group with an active volume,
 * dm-crypt, multipath), an md array, a bcache device or cache set, a mounted btrfs filesystem (in any mount
 * namespace) and an imported ZFS pool. Writing to a member under the kernel corrupts what it is part of. A
 * class serves them only with spec.hostCritical: Allow. Pure: the node's part comes in as data
 * (host-mounts.ts reads it).
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
  /** The devices it sits on: a partition's disk, a dm, md or bcache device's members (its `slaves`). */
  readonly below: readonly string[]
  /** A partition: `below` is its disk, which it is part of (a device built on its `below` holds them). */
  readonly partition?: boolean
  /** A dm device's name, as /dev/mapper/<name> shows it. */
  readonly mapperName?: string
  /** A dm device's UUID: LVM's volumes' start with `LVM-`. */
  readonly dmUuid?: string
  /** Registered with bcache (its `bcache` directory): as a backing device (of bcache<N> once running) or as a cache set's cache device. */
  readonly bcache?: {readonly role: 'backing'; readonly device?: string} | {readonly role: 'cache'; readonly set?: string}
}

/**
 * Storage the kernel has in use whose members no device holds in sysfs: a mounted btrfs filesystem
 * (/sys/fs/btrfs/<uuid>/devices), an imported ZFS pool (its members found by their udev label).
 */
export interface StoragePool {
  readonly kind: 'btrfs' | 'zfs'
  /** btrfs: the filesystem's UUID; ZFS: the pool's name. */
  readonly name: string
  /** Kernel names. */
  readonly members: readonly string[]
}

/**
 * The block devices the node uses, by device id, each with why: those that back the node's mounts and swap,
 * and everything below them, named after the mount (or swap); then the members of the storage the kernel
 * has assembled (`pools`, and every device built on others), named after it. A mount is found by its device
 * number and by its source (/dev/<kernel name> or /dev/mapper/<dm name>; btrfs reports an anonymous
 * number): the reader resolves links such as /dev/disk/by-uuid/… first.
 */
export function nodeBlockUse(mounts: readonly MountEntry[], swaps: readonly string[], devices: readonly BlockDeviceNode[], pools: readonly StoragePool[] = []): NodeBlockUse {
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
  for (const pool of pools) {
    const use = pool.kind === 'zfs' ? `is a member of the imported ZFS pool ${pool.name}` : btrfsUse(pool, ordered, fromPath)
    for (const member of pool.members) mark(byName.get(member), use)
  }
  for (const device of devices) if (device.bcache !== undefined) mark(device, bcacheUse(device.bcache))
  for (const device of devices) {
    const use = device.partition ? undefined : holderUse(device)
    if (use !== undefined) for (const name of device.below) mark(byName.get(name), use)
  }
  return {block}
}

const depth = (path: string): number => (path === '/' ? 0 : path.split('/').length)

/** Named after the node's shallowest mount of it, if the node's tables show one: a btrfs mounted in another mount namespace only is in /sys/fs/btrfs all the same. */
function btrfsUse(pool: StoragePool, mounts: readonly MountEntry[], fromPath: (path: string) => BlockDeviceNode | undefined): string {
  const mount = mounts.find((m) => pool.members.includes(fromPath(m.source)?.name ?? ''))
  return mount === undefined ? `is a member of the btrfs filesystem ${pool.name}, mounted outside the node's mount table` : `is a member of the btrfs filesystem mounted at ${mount.mountPoint}`
}

function bcacheUse(registered: NonNullable<BlockDeviceNode['bcache']>): string {
  if (registered.role === 'cache') return `is a cache device of the bcache cache set ${registered.set ?? '(unnamed)'}`
  return registered.device === undefined ? 'is a bcache backing device' : `is the backing device of /dev/${registered.device}`
}

/** What a device built on others makes of its members (`below`), or undefined for one built on nothing. */
function holderUse(device: BlockDeviceNode): string | undefined {
  if (device.below.length === 0) return undefined
  if (device.mapperName !== undefined) {
    if (device.dmUuid?.startsWith('LVM-')) return `is a physical volume of the LVM volume group ${volumeGroup(device.mapperName)}, whose volume /dev/mapper/${device.mapperName} is active`
    return `is below the active device-mapper device /dev/mapper/${device.mapperName}`
  }
  if (/^md\d/.test(device.name) || device.name.startsWith('md_')) return `is a member of the md array /dev/${device.name}`
  return `is held by /dev/${device.name}, which the kernel has built on it`
}

/** The volume group of an LVM dm name (`vg-lv`, each with its own dashes doubled). */
const volumeGroup = (mapperName: string): string => (/^((?:[^-]|--)+)-(?!-)/.exec(mapperName)?.[1] ?? mapperName).replaceAll('--', '-')
