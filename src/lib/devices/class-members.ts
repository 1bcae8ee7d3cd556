import {ClassMemory, DeviceMatcher} from './device-matcher.js'
import type {AttributeReader, Device, DeviceClass} from './types.js'

/**
 * Which present devices are in which of the node's classes, kept in step with uevents and class changes:
 * what the device plugins list and what the agent grants. A removed device has no sysfs attributes left to
 * match; it leaves the classes it was in.
 */
export class ClassMembers {
  #classes: readonly DeviceClass[] = []
  #names: string[] = []
  #memory: ClassMemory
  /** The devices of each class now, by device id (major:minor). */
  readonly #members = new Map<string, Map<string, Device>>()
  /** Every device present now, in a class or not: a class change places them all again. */
  readonly #present = new Map<string, Device>()
  /** Every device that has been in a class since start, present or not. */
  readonly #known = new Map<string, Device>()

  constructor(
    readonly readAttribute: AttributeReader,
    classes: readonly DeviceClass[] = [],
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

  /** The classes changed: every present device is placed again. */
  setClasses(classes: readonly DeviceClass[]): void {
    this.#classes = classes
    this.#names = classes.map((c) => c.metadata.name)
    this.#memory = new ClassMemory(new DeviceMatcher(classes), this.readAttribute)
    this.#members.clear()
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

  /** The devices of one class present now. */
  of(name: string): Device[] {
    return [...(this.#members.get(name)?.values() ?? [])]
  }

  /** The devices of each class present now. */
  all(): Map<string, Device[]> {
    return new Map(this.#names.map((name) => [name, this.of(name)]))
  }

  /** A device by id that has been in one of the classes since start (gone or not). */
  known(id: string): Device | undefined {
    return this.#known.get(id)
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
    if (touched.size > 0) this.#known.set(device.id, device)
    return touched
  }
}

/** Whether two readings of a device say the same (a storm of `change` uevents compares thousands). */
function sameDevice(a: Device, b: Device): boolean {
  if (a.devName !== b.devName || a.devNode !== b.devNode || a.devPath !== b.devPath || a.kernelName !== b.kernelName || a.subsystem !== b.subsystem) return false
  if (a.type !== b.type || a.major !== b.major || a.minor !== b.minor || a.devType !== b.devType) return false
  const keys = Object.keys(a.properties)
  return keys.length === Object.keys(b.properties).length && keys.every((k) => a.properties[k] === b.properties[k])
}
