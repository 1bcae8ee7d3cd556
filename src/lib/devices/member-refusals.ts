import {deviceIdentity, stableDeviceId} from './device-identity.js'
import type {Device, DeviceClass} from './types.js'

/**
 * Why a device that matches a class is not served by it:
 * - ExclusiveOverlap: it is in a class that hands it to one holder at a time (allocation Device or DRA) and
 *   in another class too, so two allocators (or an allocator and every holder of a Class class) could give
 *   it out at once; or it is part of a device of a class (a partition of a disk, a tty of a USB device whose
 *   usbfs node is in one), or holds one, and one of the two classes hands out one holder at a time;
 * - DuplicateIdentity: another present device of the class has its identity, so neither a re-plug nor an
 *   allocation could tell them apart;
 * - HostCritical: a device the node itself needs, which a class serves only when it says so.
 */
export type RefusalReason = 'ExclusiveOverlap' | 'DuplicateIdentity' | 'HostCritical'

export interface MemberRefusal {
  readonly className: string
  readonly device: Device
  readonly reason: RefusalReason
  /** One line for an operator: what collides with what, and how to end it. */
  readonly message: string
}

export interface ServedMembers {
  /** The devices each class serves, by class name, in the order they matched. */
  readonly served: Map<string, Device[]>
  readonly refusals: MemberRefusal[]
}

/**
 * Pure: of the devices matching each class, those it may serve. A device in a Device or DRA class is in no
 * other class, or it is refused in all of them: DRA classes may share a device with each other (the
 * scheduler allocates it once, from one slice) when they follow it by the same identity. Nor may a device
 * and a part of it (relativesOf) go to two holders: when either is in a Device or DRA class, both are
 * refused in every class that matches them. Then, within a class, devices with one identity are refused
 * together. `refuse` adds refusals of a device by what it is (the node's own devices).
 */
export function servedMembers(
  classes: readonly DeviceClass[],
  matched: ReadonlyMap<string, ReadonlyMap<string, Device>>,
  refuse: (device: Device, deviceClass: DeviceClass) => Omit<MemberRefusal, 'className' | 'device'> | undefined = () => undefined,
): ServedMembers {
  const byName = new Map(classes.map((c) => [c.metadata.name, c]))
  const classesOf = new Map<string, DeviceClass[]>()
  const inClasses = new Map<string, Device>()
  for (const [name, devices] of matched) {
    const deviceClass = byName.get(name)
    if (deviceClass === undefined) continue
    for (const [id, device] of devices) {
      classesOf.set(id, [...(classesOf.get(id) ?? []), deviceClass])
      inClasses.set(id, device)
    }
  }
  // Parts clash only where some class hands out one holder at a time.
  const relatives = classes.some((c) => c.spec.allocation !== 'Class') ? relativesOf(inClasses.values()) : new Map<string, Relative[]>()
  const refusals: MemberRefusal[] = []
  const served = new Map<string, Device[]>()
  for (const [name, devices] of matched) {
    const deviceClass = byName.get(name)
    if (deviceClass === undefined) continue
    const kept: Device[] = []
    for (const device of devices.values()) {
      const overlap = overlapOf(deviceClass, classesOf.get(device.id) ?? []) ?? sharedDeviceOf(device, deviceClass, relatives.get(device.id) ?? [], classesOf)
      const own = overlap ?? refuse(device, deviceClass)
      if (own === undefined) kept.push(device)
      else refusals.push({...own, className: name, device})
    }
    // One hash per device per class: this runs on every uevent that changes a class.
    const idOf = new Map(kept.map((device) => [device, stableDeviceId(device, deviceClass.spec.identity)]))
    const byIdentity = new Map<string, Device[]>()
    for (const [device, id] of idOf) byIdentity.set(id, [...(byIdentity.get(id) ?? []), device])
    served.set(
      name,
      kept.filter((device) => {
        const same = byIdentity.get(idOf.get(device)!) ?? []
        if (same.length < 2) return true
        refusals.push({className: name, device, message: duplicateMessage(name, device, same, deviceClass), reason: 'DuplicateIdentity'})
        return false
      }),
    )
  }
  return {refusals, served}
}

function overlapOf(deviceClass: DeviceClass, all: readonly DeviceClass[]): Omit<MemberRefusal, 'className' | 'device'> | undefined {
  if (all.length < 2) return undefined
  const exclusive = all.filter((c) => c.spec.allocation !== 'Class')
  if (exclusive.length === 0) return undefined
  const identities = new Set(all.map((c) => c.spec.identity ?? 'Serial'))
  if (all.every((c) => c.spec.allocation === 'DRA') && identities.size === 1) return undefined
  const others = all.filter((c) => c !== deviceClass).map(describe)
  return {
    message: `also in class ${others.join(', ')}; a device handed to one holder at a time (allocation Device or DRA) must be in no other class: served by none of them until their match rules no longer overlap`,
    reason: 'ExclusiveOverlap',
  }
}

/** A matched device that is part of another, or holds one: `part` says which way round. */
interface Relative {
  readonly device: Device
  readonly part: 'of' | 'holds'
}

/**
 * Pure: of the matched devices, which are part of which, by id. sysfs puts a device inside the device it is
 * part of: a partition's directory inside its disk's, an NVMe namespace's inside its controller's, a USB
 * interface's tty, hidraw or input nodes inside the USB device whose usbfs node (/dev/bus/usb/…) drives the
 * whole of it, and a USB device inside the hubs it hangs from. Nodes side by side within one device (two
 * partitions, an adapter's ports) are not parts of each other.
 */
export function relativesOf(devices: Iterable<Device>): Map<string, Relative[]> {
  const byPath = new Map<string, Device>()
  for (const device of devices) byPath.set(device.devPath, device)
  const relatives = new Map<string, Relative[]>()
  const add = (device: Device, relative: Relative): void => {
    const known = relatives.get(device.id)
    if (known === undefined) relatives.set(device.id, [relative])
    else known.push(relative)
  }
  for (const device of byPath.values()) {
    for (let dir = parentDir(device.devPath); dir !== undefined; dir = parentDir(dir)) {
      const whole = byPath.get(dir)
      if (whole === undefined) continue
      add(device, {device: whole, part: 'of'})
      add(whole, {device, part: 'holds'})
    }
  }
  return relatives
}

const parentDir = (devPath: string): string | undefined => {
  const slash = devPath.lastIndexOf('/')
  return slash > 0 ? devPath.slice(0, slash) : undefined
}

function sharedDeviceOf(
  device: Device,
  deviceClass: DeviceClass,
  relatives: readonly Relative[],
  classesOf: ReadonlyMap<string, readonly DeviceClass[]>,
): Omit<MemberRefusal, 'className' | 'device'> | undefined {
  const clashing = relatives.filter((r) => deviceClass.spec.allocation !== 'Class' || (classesOf.get(r.device.id) ?? []).some((c) => c.spec.allocation !== 'Class'))
  if (clashing.length === 0) return undefined
  const named = clashing.slice(0, 3).map((r) => `${r.part === 'of' ? 'is part of' : 'holds'} ${r.device.devNode} in class ${(classesOf.get(r.device.id) ?? []).map(describe).join(', ')}`)
  const more = clashing.length > 3 ? ` and ${clashing.length - 3} more` : ''
  return {
    message: `${device.devNode} ${named.join(' and ')}${more}; a device and its parts go to one holder at a time when a class hands out one holder at a time (allocation Device or DRA): served by none of these classes until their match rules take the whole device or its parts, not both`,
    reason: 'ExclusiveOverlap',
  }
}

const describe = (c: DeviceClass): string => `${c.metadata.name} (allocation ${c.spec.allocation}${c.spec.allocation === 'DRA' ? `, identity ${c.spec.identity ?? 'Serial'}` : ''})`

function duplicateMessage(name: string, device: Device, same: readonly Device[], deviceClass: DeviceClass): string {
  const identity = deviceIdentity(device, deviceClass.spec.identity)
  const others = same.filter((d) => d !== device).map((d) => d.devNode)
  const movePlug = 'plug them into different ports, or narrow the class to one of them'
  const fix = {
    port: movePlug,
    serial: 'two devices claim one serial number: unplug the copy, or set identity: SerialAndPort',
    'serial and port': 'two devices claim one serial number at one place: unplug the copy',
    sysfs: movePlug,
  }[identity.kind]
  return `${device.devNode} has the same ${identity.kind} identity as ${others.join(', ')} in class ${name} (${identity.word}): served to nobody while both are present; ${fix}`
}
