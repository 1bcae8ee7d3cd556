import {createHash} from 'node:crypto'
import {join} from 'node:path'

import {CoalescedFile, readStateFile} from '../sys/coalesced-file.js'
import {deviceIdentity} from './device-identity.js'
import type {Device} from './types.js'

/** A device number that belonged to a class on this node, and the node it had. */
export interface OwnedDevice {
  readonly type: 'b' | 'c'
  readonly major: number
  readonly minor: number
  /** Its node as the kernel named it, e.g. /dev/ttyUSB0: where a container got it. */
  readonly devNode: string
  /**
   * The classes it was a device of while owned (only these explain it in a container's spec); undefined in a
   * record written before classes were kept, which any class explains.
   */
  readonly classes?: readonly string[]
  /**
   * Which device had the number when last seen (identityDigest): a restarted agent tells from it that the
   * number has another device now, or none. Absent in records of earlier builds.
   */
  readonly identity?: string
}

const idOf = (d: OwnedDevice): string => `${d.type}${d.major}:${d.minor}`

/**
 * A device known only by its number (unplugged while nobody watched): enough of a Device to take its rule
 * back from a container and remove its node there.
 */
export function deviceOfNumber(d: OwnedDevice): Device {
  const devName = d.devNode.replace(/^\/dev\//, '')
  return {
    devName,
    devNode: d.devNode,
    devPath: '',
    id: idOf(d),
    kernelName: devName.split('/').at(-1) ?? devName,
    major: d.major,
    minor: d.minor,
    properties: {},
    subsystem: '',
    type: d.type === 'b' ? 'block' : 'char',
  }
}

/** The number of an owned device, as a Device's id names it (b7:0). */
export const ownedId = idOf

/** Pure: whether an owned number was a device of one of `classes` (a record without classes: of any). */
export const ownedBy = (owned: OwnedDevice, classes: ReadonlySet<string>): boolean => classes.size > 0 && (owned.classes === undefined || owned.classes.some((c) => classes.has(c)))

/**
 * Pure: what a device says it is, by serial and by port (both identity sources, whatever a class follows), as
 * a short digest: two readings with one digest are the same device to every class.
 */
export function identityDigest(device: Device): string {
  const keys = [deviceIdentity(device, 'Serial').key, deviceIdentity(device, 'Port').key].join('\n')
  return createHash('sha256').update(keys).digest('hex').slice(0, 16)
}

/**
 * Pure: the owned numbers whose device went while nobody watched: the one recorded there is not present
 * now, or another device has the number. Numbers recorded without an identity (an earlier build) are left out.
 */
export function numbersWithAnotherDevice(owned: readonly OwnedDevice[], present: readonly Device[]): OwnedDevice[] {
  const now = new Map(present.map((d) => [d.id, d]))
  return owned.filter((d) => {
    if (d.identity === undefined) return false
    const device = now.get(idOf(d))
    return device === undefined || identityDigest(device) !== d.identity
  })
}

const version = 1

/** The record as its file holds it: one line, in number order. */
export function encodeOwned(devices: Iterable<OwnedDevice>): string {
  const sorted = [...devices].sort((a, b) => idOf(a).localeCompare(idOf(b), 'en', {numeric: true}))
  return `${JSON.stringify({devices: sorted.map((d) => ({classes: d.classes === undefined ? undefined : [...d.classes].sort(), devNode: d.devNode, identity: d.identity, major: d.major, minor: d.minor, type: d.type})), version})}\n`
}

/** Pure: the record from its file's text; throws one line naming what is wrong. */
export function decodeOwned(text: string): OwnedDevice[] {
  let state: unknown
  try {
    state = JSON.parse(text)
  } catch (error) {
    throw new Error(`not JSON (${(error as Error).message})`)
  }
  const {devices, version: got} = (state ?? {}) as {devices?: unknown; version?: unknown}
  if (got !== version) throw new Error(`version must be ${version}, got ${JSON.stringify(got)}`)
  if (!Array.isArray(devices)) throw new Error('devices must be a list')
  return devices.map((raw: unknown, i) => {
    const at = `devices[${i}]`
    const {classes} = (raw ?? {}) as {classes?: unknown}
    if (classes === undefined) return decodeOwnedDevice(raw, at)
    if (!Array.isArray(classes) || classes.some((c) => typeof c !== 'string' || c.length === 0 || c.length > 253)) throw new Error(`${at}.classes must be a list of class names`)
    return {...decodeOwnedDevice(raw, at), classes: classes as string[]}
  })
}

/** Pure: one recorded device number (here, or in another record) at `at`; throws one line naming what is wrong. */
export function decodeOwnedDevice(raw: unknown, at: string): OwnedDevice {
  const d = (raw ?? {}) as Record<string, unknown>
  if (d.type !== 'b' && d.type !== 'c') throw new Error(`${at}.type must be "b" or "c", got ${JSON.stringify(d.type)}`)
  if (!Number.isInteger(d.major) || (d.major as number) < 0 || (d.major as number) > 0xfff) throw new Error(`${at}.major must be 0-4095, got ${JSON.stringify(d.major)}`)
  if (!Number.isInteger(d.minor) || (d.minor as number) < 0 || (d.minor as number) > 0xfffff) throw new Error(`${at}.minor must be 0-1048575, got ${JSON.stringify(d.minor)}`)
  // Only ever a node below a container's /dev is removed by it.
  if (typeof d.devNode !== 'string' || !/^\/dev\/[^\0]+$/.test(d.devNode) || d.devNode.split('/').some((s) => s === '..' || s === '.')) {
    throw new Error(`${at}.devNode must be a path below /dev/, got ${JSON.stringify(d.devNode)}`)
  }
  if (d.identity !== undefined && (typeof d.identity !== 'string' || !/^[0-9a-f]{16}$/.test(d.identity))) throw new Error(`${at}.identity must be 16 hex digits, got ${JSON.stringify(d.identity)}`)
  const device: OwnedDevice = {devNode: d.devNode, major: d.major as number, minor: d.minor as number, type: d.type}
  return d.identity === undefined ? device : {...device, identity: d.identity}
}

/**
 * The device numbers of the node's classes, kept under --state-dir, so that an agent that restarts still
 * owns a number whose device went while it was away: a number kubelet's Allocate, a CDI spec or the agent
 * put into a container for one of the classes it holds stays the agent's to take back, however the next
 * device to get the number is classed. Each number keeps the classes it was a device of: only a container
 * that holds one of them by limit or claim has it explained as the agent's (a number the runtime or another
 * plugin gave stays theirs). A number no class holds now and no container holds as the agent's is forgotten
 * (forget). Written before a number is handed out: kubelet's Allocate and DRA's prepare wait for `saved()`.
 */
export class OwnedDevices {
  readonly #devices = new Map<string, OwnedDevice>()
  readonly #file: CoalescedFile
  readonly file: string
  #generation = 0

  constructor(options: {readonly stateDir: string}) {
    this.file = join(options.stateDir, 'owned-devices.json')
    // Not flushed to disk: the containers holding these numbers do not outlive a reboot either.
    this.#file = new CoalescedFile(this.file, () => encodeOwned(this.#devices.values()), {durable: false, mode: 0o600})
  }

  /** Reads the file; a missing one is an empty record, one that cannot be used is reported and replaced by the next write. */
  async load(): Promise<string | undefined> {
    const {problem, value = []} = await readStateFile(this.file, decodeOwned)
    for (const d of value) this.#devices.set(idOf(d), d)
    this.#generation++
    return problem
  }

  /** The owned numbers as devices (for those not present, all that is known of them). */
  devices(): Device[] {
    return [...this.#devices.values()].map(deviceOfNumber)
  }

  /** An owned number by id (b7:0). */
  get(id: string): OwnedDevice | undefined {
    return this.#devices.get(id)
  }

  /** Grows with every change of the record: a number owned, a class added to one, a number forgotten. */
  get generation(): number {
    return this.#generation
  }

  /**
   * Owns this number as a device of `classes` (the classes it is in now; none adds nothing but a new node
   * name); resolves once it is on disk (at once when it was, and nothing is pending).
   */
  add(device: Device, classes: readonly string[]): Promise<void> {
    const before = this.#devices.get(device.id)
    if (before === undefined && classes.length === 0) return this.#file.flushed()
    // A number recorded without its classes stays any class's.
    const after = before !== undefined && before.classes === undefined ? undefined : [...new Set([...(before?.classes ?? []), ...classes])].sort()
    const identity = identityDigest(device)
    if (before !== undefined && before.devNode === device.devNode && before.identity === identity && after?.length === before.classes?.length) return this.#file.flushed()
    this.#devices.set(device.id, {classes: after, devNode: device.devNode, identity, major: device.major, minor: device.minor, type: device.type === 'block' ? 'b' : 'c'})
    this.#generation++
    return this.#file.save()
  }

  /** Forgets every number `keep` says no; resolves once that is on disk. */
  forget(keep: (owned: OwnedDevice) => boolean): Promise<void> {
    const gone = [...this.#devices].filter(([, d]) => !keep(d))
    if (gone.length === 0) return this.#file.flushed()
    for (const [id] of gone) this.#devices.delete(id)
    this.#generation++
    return this.#file.save()
  }

  /** Every owned number as recorded, with its classes and the device it had when last seen. */
  all(): OwnedDevice[] {
    return [...this.#devices.values()]
  }

  /** Resolves once every number added so far is on disk; rejects while the file cannot be written. */
  saved(): Promise<void> {
    return this.#file.flushed()
  }
}
