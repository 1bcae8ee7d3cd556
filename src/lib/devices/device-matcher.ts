import {compileGlob} from './glob.js'
import type {AttributeReader, Device, DeviceClass, MatchRule} from './types.js'

type Test = (value: string) => boolean

interface CompiledRule {
  readonly subsystem?: string
  readonly devName?: Test
  readonly properties: ReadonlyArray<[string, Test]>
  readonly attributes: ReadonlyArray<[string, Test]>
}

// DEVNAME is a path below /dev, so there `*` stops at `/` (`input/*` matches input/event3) as in a shell.
const compilePath = (pattern: string): Test => compileGlob(pattern, 'path')
// Property and attribute values are plain text ("USB 10/100 LAN"): there `*` matches any characters.
const compileText = (pattern: string): Test => compileGlob(pattern, 'text')

function compileRule(rule: MatchRule): CompiledRule {
  return {
    attributes: Object.entries(rule.attributes ?? {}).map(([k, v]) => [k, compileText(v)]),
    devName: rule.devName === undefined ? undefined : compilePath(rule.devName),
    properties: Object.entries(rule.properties ?? {}).map(([k, v]) => [k, compileText(v)]),
    subsystem: rule.subsystem,
  }
}

/**
 * Which DeviceClasses (devices.nfdctl.io) a device belongs to: rules are OR-ed, the fields of a rule
 * AND-ed, values are globs. Globs are compiled once per class set. Attributes are read through the given
 * reader only when the cheaper fields of a rule already matched.
 */
export class DeviceMatcher {
  readonly #classes: ReadonlyArray<{name: string; rules: CompiledRule[]}>

  constructor(classes: readonly DeviceClass[]) {
    this.#classes = classes.map((c) => ({name: c.metadata.name, rules: c.spec.match.map(compileRule)}))
  }

  /** Names of the classes the device is in, in class order. */
  classesOf(device: Device, readAttribute: AttributeReader): string[] {
    return this.#classes.filter((c) => c.rules.some((r) => matchesRule(r, device, readAttribute))).map((c) => c.name)
  }
}

function matchesRule(rule: CompiledRule, device: Device, readAttribute: AttributeReader): boolean {
  if (rule.subsystem !== undefined && rule.subsystem !== device.subsystem) return false
  if (rule.devName && !rule.devName(device.devName)) return false
  for (const [key, test] of rule.properties) {
    const value = device.properties[key]
    if (value === undefined || !test(value)) return false
  }
  for (const [name, test] of rule.attributes) {
    const value = readAttribute(device, name)
    if (value === undefined || !test(value)) return false
  }
  return true
}

/**
 * Classes per device id, remembered from when the device was present: a removed device has no sysfs
 * attributes left to match, but it left the classes it was in.
 */
export class ClassMemory {
  readonly #byId = new Map<string, string[]>()

  constructor(
    private readonly matcher: DeviceMatcher,
    private readonly readAttribute: AttributeReader,
  ) {}

  classesAfter(action: string, device: Device): string[] {
    if (action === 'remove') {
      const classes = this.#byId.get(device.id) ?? this.matcher.classesOf(device, this.readAttribute)
      this.#byId.delete(device.id)
      return classes
    }
    const classes = this.matcher.classesOf(device, this.readAttribute)
    this.#byId.set(device.id, classes)
    return classes
  }
}
