import {existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync} from 'node:fs'
import path from 'node:path'

import {ProcChangePoll} from '../sys/proc-change-poll.js'
import {type BlockDeviceNode, hostCriticalReason, type MountEntry, type NodeBlockUse, nodeBlockUse, parseMountInfo, parseSwaps, sameBlockUse, type StoragePool} from './host-critical.js'
import type {Device} from './types.js'
import {parseUdevDb} from './udev-db.js'

export interface HostMountsOptions {
  /** Default `/proc`. */
  readonly procRoot?: string
  /** Default `/sys`. */
  readonly sysRoot?: string
  /** Default `/dev`: where mount sources such as /dev/disk/by-uuid/… links are resolved. */
  readonly devRoot?: string
  /** Default `/run/udev/data`: udev's database, whose labels name the members of an imported ZFS pool. */
  readonly udevDataDir?: string
  /** How long one reading of the mount table is used; default 1 s (a class change judges every device at once). */
  readonly maxAgeMs?: number
  readonly now?: () => number
  /** A source that could not be read (told once per source). */
  readonly onReadError?: (what: string, error: unknown) => void
  /** After start(): a mount, unmount, swapon or swapoff changed which block devices the node uses. */
  readonly onChange?: () => void
  /** How often start()'s watch asks the kernel whether the mount tables changed; default 100 ms. */
  readonly watchIntervalMs?: number
}

/**
 * Reads what makes a device host-critical on this machine: the mount table of PID 1 (with hostPID, the
 * node's own; both DaemonSets run so, and check it at start), and of this process (a container sees the
 * node's disks under its bind mounts too), /proc/swaps, and sysfs's block devices with what each sits on.
 * The table is read again when a block device is judged and the last reading is older than `maxAgeMs`, and
 * after start() whenever the kernel marks one of those files changed (ProcChangePoll, asked every
 * `watchIntervalMs`): `onChange` then tells the owner to judge the classes' devices again, so a device the
 * node mounts while it is served is withdrawn (and taken back from a container that holds it) at once.
 */
export class HostMounts {
  readonly #proc: string
  readonly #sys: string
  readonly #dev: string
  readonly #told = new Set<string>()
  #read: {at: number; use: NodeBlockUse} | undefined
  /** The watch, with what it last told (a judgement in between may have read the tables already). */
  #watch: {poll: ProcChangePoll; timer: NodeJS.Timeout; told: NodeBlockUse} | undefined

  constructor(readonly options: HostMountsOptions = {}) {
    this.#proc = options.procRoot ?? '/proc'
    this.#sys = options.sysRoot ?? '/sys'
    this.#dev = options.devRoot ?? '/dev'
  }

  /** Why the device is host-critical here, or undefined (ClassMembers' `refuse`). */
  readonly reasonFor = (device: Device): string | undefined => {
    if (device.type === 'char') return hostCriticalReason(device, {block: new Map()})
    return hostCriticalReason(device, this.blockUse())
  }

  /** The node's block devices in use, read again when the last reading is older than `maxAgeMs`. */
  blockUse(): NodeBlockUse {
    const now = (this.options.now ?? Date.now)()
    if (this.#read === undefined || now - this.#read.at > (this.options.maxAgeMs ?? 1000)) this.#read = {at: now, use: this.#readNow()}
    return this.#read.use
  }

  /**
   * Follows the node's mounts and swaps from now on (onChange). A table that cannot be opened is told through
   * `onReadError` and not followed. Idempotent.
   */
  start(signal?: AbortSignal): void {
    if (this.#watch !== undefined) return
    const poll = new ProcChangePoll([...this.#mountTables(), path.join(this.#proc, 'swaps')])
    for (const {error, path: file} of poll.unopened) this.#tell(file, error)
    const timer = setInterval(() => this.#check(), this.options.watchIntervalMs ?? 100)
    timer.unref()
    this.#read = undefined
    this.#watch = {poll, timer, told: this.blockUse()}
    signal?.addEventListener('abort', () => this.stop(), {once: true})
  }

  /** Idempotent; safe before start(). */
  stop(): void {
    if (this.#watch === undefined) return
    clearInterval(this.#watch.timer)
    this.#watch.poll.close()
    this.#watch = undefined
  }

  #check(): void {
    const watch = this.#watch
    if (watch === undefined) return
    let changed: string[]
    try {
      changed = watch.poll.changed()
    } catch (error) {
      this.#tell('the mount tables (poll)', error)
      this.stop()
      return
    }
    if (changed.length === 0) return
    this.#read = {at: (this.options.now ?? Date.now)(), use: this.#readNow()}
    if (sameBlockUse(watch.told, this.#read.use)) return
    watch.told = this.#read.use
    this.options.onChange?.()
  }

  #mountTables(): string[] {
    return ['1', 'self'].map((pid) => path.join(this.#proc, pid, 'mountinfo'))
  }

  #readNow(): NodeBlockUse {
    const mounts: MountEntry[] = []
    for (const [i, file] of this.#mountTables().entries()) {
      // Where /proc hides other users' processes (hidepid), PID 1's table is closed; outside a container this process's is the same.
      const text = this.#readText(file, i === 0 ? ['EACCES', 'EPERM'] : [])
      if (text !== undefined) mounts.push(...parseMountInfo(text).map((m) => ({...m, source: this.#resolve(m.source)})))
    }
    const swaps = parseSwaps(this.#readText(path.join(this.#proc, 'swaps')) ?? '').map((s) => this.#resolve(s))
    const devices = this.#blockDevices()
    return nodeBlockUse(mounts, swaps, devices, [...this.#btrfsFilesystems(), ...this.#zfsPools(devices)])
  }

  /** Mounted btrfs filesystems: the kernel lists each, with its member devices, while it is mounted in any mount namespace. */
  #btrfsFilesystems(): StoragePool[] {
    const dir = path.join(this.#sys, 'fs', 'btrfs')
    return this.#list(dir)
      .filter((name) => uuidPattern.test(name)) // beside `features`
      .map((uuid) => ({kind: 'btrfs', members: this.#list(path.join(dir, uuid, 'devices')), name: uuid}))
  }

  /**
   * Imported ZFS pools (a directory each under /proc/spl/kstat/zfs) and their members: ZFS claims its vdevs
   * without holder links, so they are found by what udev's blkid read on them (ID_FS_TYPE zfs_member, the
   * pool's name as ID_FS_LABEL).
   */
  #zfsPools(devices: readonly BlockDeviceNode[]): StoragePool[] {
    const dir = path.join(this.#proc, 'spl', 'kstat', 'zfs')
    const imported = this.#list(dir).filter((name) => isDirectory(path.join(dir, name)))
    if (imported.length === 0) return []
    const members = new Map(imported.map((pool) => [pool, [] as string[]]))
    const udev = this.options.udevDataDir ?? '/run/udev/data'
    for (const device of devices) {
      const text = this.#readText(path.join(udev, `b${device.devNumber}`), ['ENOENT'])
      const properties = text === undefined ? {} : parseUdevDb(text).properties
      if (properties.ID_FS_TYPE === 'zfs_member') members.get(properties.ID_FS_LABEL ?? '')?.push(device.name)
    }
    return [...members].map(([name, names]) => ({kind: 'zfs', members: names, name}))
  }

  /** A directory's entries; none where it does not exist (the filesystem or module is not in this kernel). */
  #list(dir: string): string[] {
    try {
      return readdirSync(dir)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.#tell(dir, error)
      return []
    }
  }

  #blockDevices(): BlockDeviceNode[] {
    const classDir = path.join(this.#sys, 'class', 'block')
    let names: string[]
    try {
      names = readdirSync(classDir)
    } catch (error) {
      this.#tell(classDir, error)
      return []
    }
    const devices: BlockDeviceNode[] = []
    for (const name of names) {
      const dir = path.join(classDir, name)
      const devNumber = this.#readText(path.join(dir, 'dev'))?.trim()
      if (devNumber === undefined) continue
      const below = listOrEmpty(path.join(dir, 'slaves'))
      // A partition's sysfs directory is inside its disk's.
      const partition = existsSync(path.join(dir, 'partition'))
      const disk = partition ? parentName(dir) : undefined
      if (disk !== undefined) below.push(disk)
      const dm = existsSync(path.join(dir, 'dm', 'name'))
      const mapperName = dm ? this.#readText(path.join(dir, 'dm', 'name'))?.trim() : undefined
      const dmUuid = dm ? this.#readText(path.join(dir, 'dm', 'uuid'))?.trim() : undefined
      devices.push({bcache: bcacheRegistration(dir), below, devNumber, dmUuid, mapperName, name, partition})
    }
    return devices
  }

  /** A /dev/… source as the kernel names it: links (/dev/disk/by-uuid/…, /dev/root) followed where they resolve. */
  #resolve(source: string): string {
    if (!source.startsWith('/dev/') || source.startsWith('/dev/mapper/')) return source
    try {
      const real = realpathSync(path.join(this.#dev, source.slice('/dev/'.length)))
      const relative = path.relative(this.#dev, real)
      return relative.startsWith('..') ? source : `/dev/${relative}`
    } catch {
      // Not a path on this machine's /dev (a container without the host's /dev): the name as written.
      return source
    }
  }

  #readText(file: string, expected: readonly string[] = []): string | undefined {
    try {
      return readFileSync(file, 'utf8')
    } catch (error) {
      if (!expected.includes((error as NodeJS.ErrnoException).code ?? '')) this.#tell(file, error)
      return undefined
    }
  }

  #tell(what: string, error: unknown): void {
    if (this.#told.has(what)) return
    this.#told.add(what)
    this.options.onReadError?.(what, error)
  }
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * bcache's `bcache` directory in a registered device's: a cache device's links to its cache set (`set`), a
 * backing device's to its bcache<N> once that runs (`dev`). bcache<N>'s own `bcache` is a link back to its
 * backing device's.
 */
function bcacheRegistration(dir: string): BlockDeviceNode['bcache'] {
  const registered = path.join(dir, 'bcache')
  if (!isDirectory(registered, lstatSync)) return undefined
  const target = (link: string): string | undefined => {
    try {
      return path.basename(realpathSync(path.join(registered, link)))
    } catch {
      return undefined // not there (a backing device without its cache yet), or gone meanwhile
    }
  }
  if (existsSync(path.join(registered, 'set'))) return {role: 'cache', set: target('set')}
  return {device: target('dev'), role: 'backing'}
}

function isDirectory(file: string, stat: typeof statSync = statSync): boolean {
  try {
    return stat(file).isDirectory()
  } catch {
    return false // not there, or gone meanwhile
  }
}

function parentName(dir: string): string | undefined {
  try {
    return path.basename(path.dirname(realpathSync(dir)))
  } catch {
    return undefined // removed meanwhile
  }
}

function listOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    // Devices that nothing can sit on (loop devices before 5.x, some virtual ones) have no slaves directory.
    return []
  }
}
