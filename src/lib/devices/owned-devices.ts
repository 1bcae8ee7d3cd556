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

/**
 * Pure: what a device says it is, by serial and by port (both identity sources, whatever a class follows), as
 * a short digest: two readings with one digest are the same device to every class.
 */
export function identityDigest(device: Device): string {
  const keys = [deviceIdentity(device, 'Serial').key, deviceIdentity(device, 'Port').key].join('\n')
  return createHash('sha256').update(keys).digest('hex').slice(0, 16)
}

const ownedOf = (d: Device): OwnedDevice => ({devNode: d.devNode, identity: identityDigest(d), major: d.major, minor: d.minor, type: d.type === 'block' ? 'b' : 'c'})

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
  return `${JSON.stringify({devices: sorted.map((d) => ({devNode: d.devNode, identity: d.identity, major: d.major, minor: d.minor, type: d.type})), version})}\n`
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
  return devices.map((raw: unknown, i) => decodeOwnedDevice(raw, `devices[${i}]`))
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
 * Every device number that belonged to a class on this node, kept under --state-dir, so that an agent that
 * restarts still owns a number whose device went while it was away: whoever put that number into a
 * container (kubelet's Allocate, a CDI spec, the agent), the agent takes it back when it is not the
 * container's to have, however the next device to get the number is classed. Numbers are never forgotten:
 * the set is as large as the numbers the node's class devices ever had (one entry per number, the newest
 * node name kept). Written before a number is handed out: kubelet's Allocate and DRA's prepare wait for
 * `saved()`.
 */
export class OwnedDevices {
  readonly #devices = new Map<string, OwnedDevice>()
  readonly #file: CoalescedFile
  readonly file: string

  constructor(options: {readonly stateDir: string}) {
    this.file = join(options.stateDir, 'owned-devices.json')
    // Not flushed to disk: the containers holding these numbers do not outlive a reboot either.
    this.#file = new CoalescedFile(this.file, () => encodeOwned(this.#devices.values()), {durable: false, mode: 0o600})
  }

  /** Reads the file; a missing one is an empty record, one that cannot be used is reported and replaced by the next write. */
  async load(): Promise<string | undefined> {
    const {problem, value = []} = await readStateFile(this.file, decodeOwned)
    for (const d of value) this.#devices.set(idOf(d), d)
    return problem
  }

  /** The owned numbers as recorded, with the device each had when last seen. */
  recorded(): OwnedDevice[] {
    return [...this.#devices.values()]
  }

  /** The owned numbers as devices (for those not present, all that is known of them). */
  devices(): Device[] {
    return [...this.#devices.values()].map(deviceOfNumber)
  }

  /** Owns these numbers; resolves once they are on disk (at once when all were, and nothing is pending). */
  add(devices: Iterable<Device>): Promise<void> {
    let changed = false
    for (const device of devices) {
      const owned = ownedOf(device)
      const before = this.#devices.get(device.id)
      if (before !== undefined && before.devNode === owned.devNode && before.identity === owned.identity) continue
      this.#devices.set(device.id, owned)
      changed = true
    }
    return changed ? this.#file.save() : this.#file.flushed()
  }

  /** Resolves once every number added so far is on disk; rejects while the file cannot be written. */
  saved(): Promise<void> {
    return this.#file.flushed()
  }
}
