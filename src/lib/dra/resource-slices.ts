import {createHash} from 'node:crypto'

import type {Device, DeviceClass} from '../devices/types.js'
import {stableDeviceId, type IdentitySource} from '../devices/device-identity.js'
import {resourceDomain} from '../devices/resource-names.js'

/** The DRA driver name: ResourceSlices, allocation results and CDI kinds all carry it. */
export const draDriver = resourceDomain

/**
 * resource.k8s.io/v1's limits (k8s.io/api/resource/v1): devices a slice (64 once any device of it has a
 * taint), the two parts of an attribute name, a string value.
 */
const sliceLimits = {attributeDomain: 63, attributeId: 32, attributesPerDevice: 32, devicesPerSlice: 128, devicesPerTaintedSlice: 64, stringValue: 64} as const

export type DeviceAttribute = {readonly string: string} | {readonly int: number} | {readonly bool: boolean}

/** resource.k8s.io/v1 DeviceTaint: what the device's state does to claims that do not tolerate it. */
export interface DeviceTaint {
  readonly key: string
  readonly value?: string
  readonly effect: 'NoExecute' | 'NoSchedule' | 'None'
  /** RFC 3339: when the taint (or, for NoExecute, the eviction) began. */
  readonly timeAdded?: string
}

/** One device of a ResourceSlice (resource.k8s.io/v1 Device, flat since v1). */
export interface SliceDevice {
  /** The device's stable ID as a DNS label: the same device keeps it under any kernel name. */
  readonly name: string
  readonly attributes: Readonly<Record<string, DeviceAttribute>>
  /** Only on a device that is unplugged (unplugged-devices.ts). */
  readonly taints?: readonly DeviceTaint[]
}

export interface ResourceSlice {
  readonly apiVersion: 'resource.k8s.io/v1'
  readonly kind: 'ResourceSlice'
  readonly metadata: {readonly name: string; readonly resourceVersion?: string}
  readonly spec: {
    readonly driver: string
    readonly nodeName: string
    readonly pool: {readonly name: string; readonly generation: number; readonly resourceSliceCount: number}
    readonly devices: readonly SliceDevice[]
  }
}

/**
 * A stable device ID as a DRA device name (a DNS label): lower case, runs of anything but letters and digits
 * become one dash. The ID's hash part keeps two devices apart whatever their serials fold to.
 */
export function draDeviceName(stableId: string): string {
  return (
    stableId
      .toLowerCase()
      .replaceAll(/[^a-z0-9]+/g, '-')
      .replaceAll(/^-+|-+$/g, '')
      .slice(0, 63)
      .replace(/-+$/, '') || 'device'
  )
}

/**
 * The boolean attribute (in the devices.nfdctl.io domain) that says a device is in a class, the one the
 * class's resource.k8s.io DeviceClass selects on. An attribute ID is a C identifier of at most 32
 * characters: `class_<name>` with dashes as underscores while that fits and the name has no dot (names have
 * no underscores, so this is one to one); otherwise `cls_`, a prefix of the name and a hash of all of it (a
 * prefix no readable form has, so the two forms never meet).
 */
export function classAttribute(className: string): string {
  const readable = `class_${className.replaceAll('-', '_')}`
  if (!className.includes('.') && readable.length <= sliceLimits.attributeId) return readable
  const hash = createHash('sha256').update(className).digest('hex').slice(0, 12)
  const prefix = className.replaceAll(/[^a-z0-9]+/g, '_').slice(0, sliceLimits.attributeId - 'cls_'.length - hash.length - 1)
  return `cls_${prefix}_${hash}`
}

/** A string attribute, cut to the API server's limit, which counts UTF-8 bytes (never inside a character). */
function text(value: string): DeviceAttribute {
  if (Buffer.byteLength(value) <= sliceLimits.stringValue) return {string: value}
  let cut = ''
  for (const char of value) {
    if (Buffer.byteLength(cut + char) > sliceLimits.stringValue) break
    cut += char
  }
  return {string: cut}
}

/**
 * Pure: what a slice says of one device: its identity from the kernel and udev (kernel name, numbers, vendor
 * and model IDs, serial) and one `class_*` attribute per DRA class it is in, at most as many as a device may
 * carry (the classes past that are listed in `dropped`, for the log).
 */
export function sliceDeviceOf(device: Device, classes: readonly string[], identity?: IdentitySource): {device: SliceDevice; dropped: string[]} {
  const p = device.properties
  const stableId = stableDeviceId(device, identity)
  const attributes: Record<string, DeviceAttribute> = {
    kernelName: text(device.devName),
    major: {int: device.major},
    minor: {int: device.minor},
    stableId: text(stableId),
    subsystem: text(device.subsystem),
    type: text(device.type),
  }
  if (p.ID_VENDOR_ID !== undefined) attributes.vendorId = text(p.ID_VENDOR_ID)
  if (p.ID_MODEL_ID !== undefined) attributes.modelId = text(p.ID_MODEL_ID)
  const serial = p.ID_SERIAL_SHORT ?? p.ID_SERIAL
  if (serial !== undefined) attributes.serial = text(serial)
  const room = sliceLimits.attributesPerDevice - Object.keys(attributes).length
  const sorted = [...classes].sort()
  for (const name of sorted.slice(0, room)) attributes[classAttribute(name)] = {bool: true}
  return {device: {attributes: prefixed(attributes), name: draDeviceName(stableId)}, dropped: sorted.slice(room)}
}

/** Attribute names qualified with the driver's domain, so that CEL reads them as device.attributes["devices.nfdctl.io"].x. */
function prefixed(attributes: Record<string, DeviceAttribute>): Record<string, DeviceAttribute> {
  return Object.fromEntries(Object.entries(attributes).map(([id, value]) => [`${draDriver}/${id}`, value]))
}

/** A device of the pool, with the DRA classes it is in and the identity they follow it by. */
export interface PoolMember {
  readonly device: Device
  readonly classes: readonly string[]
  readonly identity?: IdentitySource
}

export interface NodeDevices {
  /** The devices of the node's DRA classes, one per stable ID, in name order. */
  readonly devices: SliceDevice[]
  /** The present device behind each name. */
  readonly byName: ReadonlyMap<string, Device>
  /** The present device behind each name, with its classes. */
  readonly members: ReadonlyMap<string, PoolMember>
  /** Classes a device could not be marked with (too many attributes), by device name. */
  readonly dropped: ReadonlyMap<string, string[]>
}

/**
 * Pure: the node's DRA devices from the members of its DRA classes: a device in several classes is one
 * device with several `class_*` attributes (DRA allocates it once, through whichever class a claim names).
 */
export function nodeDevicesOf(classes: readonly DeviceClass[], members: (className: string) => readonly Device[]): NodeDevices {
  const classesOf = new Map<string, {device: Device; classes: string[]; identity?: IdentitySource}>()
  for (const deviceClass of classes) {
    if (deviceClass.spec.allocation !== 'DRA') continue
    for (const device of members(deviceClass.metadata.name)) {
      const name = draDeviceName(stableDeviceId(device, deviceClass.spec.identity))
      const entry = classesOf.get(name) ?? {classes: [], device, identity: deviceClass.spec.identity}
      entry.classes.push(deviceClass.metadata.name)
      classesOf.set(name, entry)
    }
  }
  const devices: SliceDevice[] = []
  const dropped = new Map<string, string[]>()
  const byName = new Map<string, Device>()
  const inPool = new Map<string, PoolMember>()
  for (const [name, entry] of [...classesOf].sort(([a], [b]) => a.localeCompare(b))) {
    const made = sliceDeviceOf(entry.device, entry.classes, entry.identity)
    devices.push(made.device)
    byName.set(name, entry.device)
    inPool.set(name, entry)
    if (made.dropped.length > 0) dropped.set(name, made.dropped)
  }
  return {byName, devices, dropped, members: inPool}
}

/**
 * The name of a node's slice `index`: `<node>-devices.nfdctl.io-<index>`, with the node name shortened and
 * hashed when that would pass an object name's 253 characters.
 */
export function sliceName(nodeName: string, index: number): string {
  const suffix = `-${draDriver}-${index}`
  if (nodeName.length + suffix.length <= 253) return `${nodeName}${suffix}`
  const hash = createHash('sha256').update(nodeName).digest('hex').slice(0, 12)
  // A DNS subdomain: the shortened part must not end in the middle of a separator.
  return `${nodeName.slice(0, 253 - suffix.length - hash.length - 1).replace(/[.-]+$/, '')}-${hash}${suffix}`
}

/**
 * Pure: the node's pool (named after the node) as ResourceSlices of at most 128 devices each (64 when any
 * device of the pool is tainted), every one with the pool's generation and slice count, so that the
 * scheduler reads the pool whole or waits. A node without devices still has one empty slice: the pool
 * exists and is known to be empty.
 */
export function nodeSlicesOf(nodeName: string, devices: readonly SliceDevice[], generation: number): ResourceSlice[] {
  const perSlice = devices.some((d) => (d.taints?.length ?? 0) > 0) ? sliceLimits.devicesPerTaintedSlice : sliceLimits.devicesPerSlice
  const chunks: SliceDevice[][] = []
  for (let i = 0; i < devices.length; i += perSlice) chunks.push(devices.slice(i, i + perSlice))
  if (chunks.length === 0) chunks.push([])
  return chunks.map((chunk, index) => ({
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: {name: sliceName(nodeName, index)},
    spec: {devices: chunk, driver: draDriver, nodeName, pool: {generation, name: nodeName, resourceSliceCount: chunks.length}},
  }))
}

/**
 * Pure: whether a slice read from the API server lists what the wanted one lists, in the same pool shape
 * (its generation aside). Compared by name, attributes and taints, whatever order the server wrote the keys in.
 */
export function sameDevices(have: Pick<ResourceSlice, 'spec'>, want: Pick<ResourceSlice, 'spec'>): boolean {
  const taints = (d: SliceDevice): string[][] => (d.taints ?? []).map((t) => [t.key, t.value ?? '', t.effect, t.timeAdded ?? ''])
  const key = (devices: readonly SliceDevice[] | undefined): string =>
    JSON.stringify((devices ?? []).map((d) => [d.name, Object.entries(d.attributes ?? {}).sort(([a], [b]) => a.localeCompare(b)), taints(d)]))
  return have.spec.nodeName === want.spec.nodeName && have.spec.pool?.resourceSliceCount === want.spec.pool.resourceSliceCount && key(have.spec.devices) === key(want.spec.devices)
}
