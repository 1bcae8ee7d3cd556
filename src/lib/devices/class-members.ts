import {ClassMemory, DeviceMatcher} from './device-matcher.js'
import {servedMembers, type MemberRefusal, type ServedMembers} from './member-refusals.js'
import type {AttributeReader, Device, DeviceClass} from './types.js'

export interface ClassMembersOptions {
  /** Refuses a device by what it is, whatever class matches it (the node's own devices). */
  readonly refuse?: Parameters<typeof servedMembers>[2]
  /**
   * Told of each device that joins, leaves or changes in a class, with the classes that match it now (its
   * number is the agent's for those classes from then on: OwnedDevices keeps it).
   */
  readonly onKnown?: (device: Device, classes: readonly string[]) => void
}

/**
 * Which present devices are in which of the node's classes, kept in step with uevents and class changes:
 * what the device plugins list, DRA publishes and the agent grants. A removed device has no sysfs attributes
 * left to match; it leaves the classes it was in. A device a class matches but may not serve (member-refusals.ts)
 * is left out of it, and listed in refusals().
 */
export class ClassMembers {
  #classes: readonly DeviceClass[] = []
  #names: string[] = []
  #memory: ClassMemory
  /** The devices each class matches now, by device id (major:minor), refused or not. */
  readonly #members = new Map<string, Map<string, Device>>()
  /** What the classes serve of their matches, worked out again after any change. */
  #served: ServedMembers | undefined
  /** Every device present now, in a class or not: a class change places them all again. */
  readonly #present = new Map<string, Device>()
  /** Every device that has been in a class since start (or was remembered), present or not. */
  readonly #known = new Map<string, Device>()
  #generation = 0

  constructor(
    readonly readAttribute: AttributeReader,
    classes: readonly DeviceClass[] = [],
    readonly options: ClassMembersOptions = {},
  ) {
    this.#memory = new ClassMemory(new DeviceMatcher([]), readAttribute)
    this.setClasses(classes)
  }

  get classes(): readonly DeviceClass[] {
    return this.#classes
  }

  get classNames(): readonly string[] {
    return this.#names
  }

  /**
   * Grows with every change of what the classes hold: of two readings of the members, the one taken at the
   * higher generation is the newer (compare, never count).
   */
  get generation(): number {
    return this.#generation
  }

  /** The classes changed: every present device is placed again. */
  setClasses(classes: readonly DeviceClass[]): void {
    this.#generation++
    this.#classes = classes
    this.#names = classes.map((c) => c.metadata.name)
    this.#memory = new ClassMemory(new DeviceMatcher(classes), this.readAttribute)
    this.#members.clear()
    this.#served = undefined
    for (const name of this.#names) this.#members.set(name, new Map())
    for (const device of this.#present.values()) this.#place('add', device)
  }

  /**
   * A device event (or the initial scan's `add`s); returns the classes it changed: the device joined or left
   * them, or is in them with other details. A `change` that leaves everything as it was changes none.
   */
  deviceEvent(action: string, device: Device): ReadonlySet<string> {
    if (action === 'remove') this.#present.delete(device.id)
    else this.#present.set(device.id, device)
    return this.#place(action, device)
  }

  /**
   * What makes a device the node's own changed (a mount, a swap: HostMounts' onChange): what each class serves
   * is worked out again. Returns the classes whose served devices changed.
   */
  hostChanged(): ReadonlySet<string> {
    const before = this.#servedNow()
    this.#served = undefined
    const after = this.#servedNow()
    const touched = new Set([...after.served].filter(([name, devices]) => !sameIds(devices, before.served.get(name) ?? [])).map(([name]) => name))
    if (touched.size > 0) this.#generation++
    return touched
  }

  /** The devices of one class present now, that it serves. */
  of(name: string): Device[] {
    return [...(this.#servedNow().served.get(name) ?? [])]
  }

  /** The devices classes match but do not serve, with the reasons. */
  refusals(): readonly MemberRefusal[] {
    return this.#servedNow().refusals
  }

  /** The devices of each class present now. */
  all(): Map<string, Device[]> {
    return new Map(this.#names.map((name) => [name, this.of(name)]))
  }

  /** Every device present now, in a class or not. */
  present(): Device[] {
    return [...this.#present.values()]
  }

  /** A device by id that has been in one of the classes since start, or was remembered (gone or not). */
  known(id: string): Device | undefined {
    return this.#known.get(id)
  }

  /** Devices that were class devices before this process (the owned numbers on disk): known, in no class. */
  remember(devices: Iterable<Device>): void {
    for (const device of devices) if (!this.#known.has(device.id)) this.#known.set(device.id, device)
  }

  #servedNow(): ServedMembers {
    this.#served ??= servedMembers(this.#classes, this.#members, this.options.refuse)
    return this.#served
  }

  #place(action: string, device: Device): Set<string> {
    const inClasses = new Set(this.#memory.classesAfter(action, device))
    const touched = new Set<string>()
    for (const [name, members] of this.#members) {
      const before = members.get(device.id)
      if (action !== 'remove' && inClasses.has(name)) {
        members.set(device.id, device)
        if (before === undefined || !sameDevice(before, device)) touched.add(name)
      } else if (members.delete(device.id)) touched.add(name)
    }
    if (touched.size === 0) return touched
    this.#generation++
    this.#known.set(device.id, device)
    this.options.onKnown?.(device, action === 'remove' ? [] : [...inClasses])
    // A device joining or leaving a class can refuse or free others: every class whose served devices changed is touched.
    const before = this.#served
    this.#served = undefined
    if (before !== undefined) {
      const after = this.#servedNow()
      for (const [name, devices] of after.served) if (!sameIds(devices, before.served.get(name) ?? [])) touched.add(name)
    }
    return touched
  }
}

const sameIds = (a: readonly Device[], b: readonly Device[]): boolean => a.length === b.length && a.every((d, i) => d === b[i])

/** Whether two readings of a device say the same (a storm of `change` uevents compares thousands). */
function sameDevice(a: Device, b: Device): boolean {
  if (a.devName !== b.devName || a.devNode !== b.devNode || a.devPath !== b.devPath || a.kernelName !== b.kernelName || a.subsystem !== b.subsystem) return false
  if (a.type !== b.type || a.major !== b.major || a.minor !== b.minor || a.devType !== b.devType) return false
  const keys = Object.keys(a.properties)
  return keys.length === Object.keys(b.properties).length && keys.every((k) => a.properties[k] === b.properties[k])
}
