import {lstatSync, readFileSync, readlinkSync, realpathSync} from 'node:fs'
import {readdir, realpath} from 'node:fs/promises'
import path from 'node:path'

import {errorMessage} from '../errors.js'
import type {AttributeReader, Device} from './types.js'
import {readUdevProperties} from './udev-db.js'

export interface SysfsScannerOptions {
  /** Where sysfs is mounted; default `/sys`. Tests point it at a fake tree. */
  readonly sysRoot?: string
  /** The udev database; default `/run/udev/data`. Absent on machines without udevd, which is fine. */
  readonly udevDataDir?: string
}

type DeviceType = Device['type']

const entryNamePattern = /^(\d+):(\d+)$/

/** Parses a sysfs `uevent` file (`KEY=VALUE` lines). Pure. */
export function parseUeventFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=')
    if (eq > 0) vars[line.slice(0, eq)] = line.slice(eq + 1)
  }

  return vars
}

/** Lists device nodes from sysfs (`/sys/dev/{char,block}`), enriched with the udev database when there is one. */
export class SysfsScanner {
  private readonly sysRoot: string
  private readonly devicesRoot: string
  private readonly udevDataDir: string
  private realSysRoot: Promise<string> | undefined

  constructor(options: SysfsScannerOptions = {}) {
    this.sysRoot = path.resolve(options.sysRoot ?? '/sys')
    this.devicesRoot = path.join(this.sysRoot, 'devices')
    this.udevDataDir = options.udevDataDir ?? '/run/udev/data'
  }

  /**
   * Every char and block device that has a device node, sorted by type, major, minor. One device after the
   * other, each read synchronously (readEntry): about 0.1 ms a device.
   */
  async scanAll(): Promise<Device[]> {
    const root = await this.resolvedSysRoot()
    const devices: Device[] = []
    for (const type of ['block', 'char'] as const) {
      for (const name of await this.listEntries(type)) {
        const match = entryNamePattern.exec(name)
        if (match === null) continue
        const device = await this.readEntry(root, type, Number(match[1]), Number(match[2]))
        if (device !== undefined) devices.push(device)
      }
    }
    return devices.sort(compareDevices)
  }

  /** The device `type major:minor`, or undefined when the kernel has none (or it has no device node). */
  async scanOne(type: DeviceType, major: number, minor: number): Promise<Device | undefined> {
    if ((type !== 'block' && type !== 'char') || !isDeviceNumber(major) || !isDeviceNumber(minor)) return undefined
    return this.readEntry(await this.resolvedSysRoot(), type, major, minor)
  }

  /**
   * Synchronous because matchers call it inside filter predicates; one lstat per directory level keeps it cheap.
   * Nothing is cached: attributes such as `size` or `authorized` change while the device lives.
   */
  readonly readAttribute: AttributeReader = (device, name) => {
    if (!isAttributeName(name)) return undefined
    // path.join normalises any '..' in devPath, so the prefix check really bounds the walk to <sysRoot>/devices.
    const start = path.join(this.sysRoot, device.devPath)
    if (start !== this.devicesRoot && !start.startsWith(this.devicesRoot + path.sep)) return undefined
    for (let dir = start; ; dir = path.dirname(dir)) {
      const file = path.join(dir, name)
      // lstat: an attribute is a regular file; symlinks (driver, subsystem, device) lead out of the ancestry.
      if (isRegularFile(file)) return readAttributeFile(file)
      if (dir === this.devicesRoot) return undefined
    }
  }

  private async listEntries(type: DeviceType): Promise<string[]> {
    const dir = path.join(this.sysRoot, 'dev', type)
    try {
      return await readdir(dir)
    } catch (error) {
      throw new Error(`cannot list ${type} devices in ${dir}: ${errorMessage(error)}`, {cause: error})
    }
  }

  /** realpath results are compared against this, so a sysRoot reached through symlinks (e.g. a temp dir) still works. */
  private resolvedSysRoot(): Promise<string> {
    this.realSysRoot ??= realpath(this.sysRoot).catch((error: unknown) => {
      this.realSysRoot = undefined
      throw new Error(`sysfs root ${this.sysRoot} is not accessible: ${errorMessage(error)}`, {cause: error})
    })
    return this.realSysRoot
  }

  /**
   * Reads one `/sys/dev/<type>/<major>:<minor>` entry; undefined when it vanished, is unreadable or has no node.
   * Synchronously: sysfs and the udev database are in memory and answer in microseconds, while a step through
   * libuv's thread pool costs two wake-ups, which a busy node turns into milliseconds on a hot-plug's path.
   */
  private async readEntry(root: string, type: DeviceType, major: number, minor: number): Promise<Device | undefined> {
    try {
      const dir = realpathSync.native(path.join(this.sysRoot, 'dev', type, `${major}:${minor}`))
      const devPath = '/' + path.relative(root, dir)
      if (!devPath.startsWith('/devices/')) return undefined
      const ueventText = readFileSync(path.join(dir, 'uevent'), 'utf8')
      // The link's last component is the subsystem's name, so readlink spares resolving the whole chain.
      const subsystemTarget = readlinkSync(path.join(dir, 'subsystem'))
      const uevent = parseUeventFile(ueventText)
      const devName = uevent.DEVNAME
      if (devName === undefined || devName.length === 0) return undefined
      // A different device can take over the entry between readdir and here (hot-plug); it gets its own entry.
      if (!sameNumber(uevent.MAJOR, major) || !sameNumber(uevent.MINOR, minor)) return undefined
      const id = `${type === 'block' ? 'b' : 'c'}${major}:${minor}`
      const udev = await this.udevProperties(id)
      return {
        devName,
        devNode: `/dev/${devName}`,
        devPath,
        ...(uevent.DEVTYPE === undefined ? {} : {devType: uevent.DEVTYPE}),
        id,
        kernelName: path.basename(dir),
        major,
        minor,
        properties: {...uevent, ...udev},
        subsystem: path.basename(subsystemTarget),
        type,
      }
    } catch (error) {
      if (isFsError(error)) return undefined
      throw error
    }
  }

  /** An unreadable udev record must not hide a device the kernel reports; its uevent variables still hold. */
  private async udevProperties(id: string): Promise<Record<string, string> | undefined> {
    try {
      return await readUdevProperties(this.udevDataDir, id)
    } catch {
      return undefined
    }
  }
}

function compareDevices(a: Device, b: Device): number {
  if (a.type !== b.type) return a.type < b.type ? -1 : 1
  return a.major - b.major || a.minor - b.minor
}

function isDeviceNumber(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0
}

/** uevent files always carry MAJOR/MINOR for device nodes; when one is missing, trust the entry name. */
function sameNumber(value: string | undefined, expected: number): boolean {
  return value === undefined || Number(value) === expected
}

function isAttributeName(name: string): boolean {
  return name.length > 0 && name !== '.' && !name.includes('/') && !name.includes('..') && !name.includes('\0')
}

function isRegularFile(file: string): boolean {
  try {
    return lstatSync(file, {throwIfNoEntry: false})?.isFile() ?? false
  } catch {
    // ENOTDIR/EACCES on the way: the attribute is not there for us either way.
    return false
  }
}

/**
 * sysfs values end in one newline. Write-only or driver-refused attributes fail with EACCES/EIO and count as
 * absent; the walk does not go on to a parent, whose attribute of the same name describes another device.
 */
function readAttributeFile(file: string): string | undefined {
  try {
    const text = readFileSync(file, 'utf8')
    return text.endsWith('\n') ? text.slice(0, -1) : text
  } catch {
    return undefined
  }
}

/** Errors from the file system (vanished or unreadable entries) as opposed to bugs, which must surface. */
function isFsError(error: unknown): boolean {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === 'string'
}
