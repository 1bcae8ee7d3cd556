import {deviceIdentity, stableDeviceId} from './device-identity.js'
import type {Device, DeviceClass} from './types.js'

/**
 * Why a device that matches a class is not served by it:
 * - ExclusiveOverlap: it is in a class that hands it to one holder at a time (allocation Device or DRA) and
 *   in another class too, so two allocators (or an allocator and every holder of a Class class) could give
 *   it out at once;
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
 * scheduler allocates it once, from one slice) when they follow it by the same identity. Then, within a
 * class, devices with one identity are refused together. `refuse` adds refusals of a device by what it is
 * (the node's own devices).
 */
export function servedMembers(
  classes: readonly DeviceClass[],
  matched: ReadonlyMap<string, ReadonlyMap<string, Device>>,
  refuse: (device: Device, deviceClass: DeviceClass) => Omit<MemberRefusal, 'className' | 'device'> | undefined = () => undefined,
): ServedMembers {
  const byName = new Map(classes.map((c) => [c.metadata.name, c]))
  const classesOf = new Map<string, DeviceClass[]>()
  for (const [name, devices] of matched) {
    const deviceClass = byName.get(name)
    if (deviceClass === undefined) continue
    for (const id of devices.keys()) classesOf.set(id, [...(classesOf.get(id) ?? []), deviceClass])
  }
  const refusals: MemberRefusal[] = []
  const served = new Map<string, Device[]>()
  for (const [name, devices] of matched) {
    const deviceClass = byName.get(name)
    if (deviceClass === undefined) continue
    const kept: Device[] = []
    for (const device of devices.values()) {
      const overlap = overlapOf(deviceClass, classesOf.get(device.id) ?? [])
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

const describe = (c: DeviceClass): string => `${c.metadata.name} (allocation ${c.spec.allocation}${c.spec.allocation === 'DRA' ? `, identity ${c.spec.identity ?? 'Serial'}` : ''})`

function duplicateMessage(name: string, device: Device, same: readonly Device[], deviceClass: DeviceClass): string {
  const identity = deviceIdentity(device, deviceClass.spec.identity)
  const others = same.filter((d) => d !== device).map((d) => d.devNode)
  const fix = identity.kind === 'serial' ? 'two devices claim one serial number: unplug the copy, or set identity: Port' : 'plug them into different ports, or narrow the class to one of them'
  return `${device.devNode} has the same ${identity.kind} identity as ${others.join(', ')} in class ${name} (${identity.word}): served to nobody while both are present; ${fix}`
}
