import picomatch from 'picomatch'

import {errorMessage} from '../errors.js'
import {dnsSubdomainPattern, labelKeyProblem, labelValueProblem} from './label-selector.js'
import type {DeviceClass, DeviceClassSpec, LabelSelector, MatchRule, ValidationIssue} from './types.js'

/** The class with its defaults applied, or every issue found, each at its field path. */
export type DeviceClassValidation = {ok: true; deviceClass: DeviceClass} | {ok: false; issues: ValidationIssue[]}

export const deviceClassApiVersion = 'devices.nfdctl.io/v1alpha1'
export const deviceClassDefaults = {allocation: 'Class', capacity: 1, permissions: 'rw'} as const

type LabelExpression = NonNullable<LabelSelector['matchExpressions']>[number]
type Report = (path: string, message: string) => void

const specFields = ['nodeSelector', 'match', 'permissions', 'allocation', 'capacity'] as const
const ruleFields = ['subsystem', 'devName', 'properties', 'attributes'] as const
const selectorFields = ['matchLabels', 'matchExpressions'] as const
const expressionFields = ['key', 'operator', 'values'] as const
const operators = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const
const allocations = ['Class', 'Device'] as const

// The class name is also the name part of the kubelet resource devices.nfdctl.io/<name>, capped at 63.
const maxClassName = 63

/**
 * The one check of a DeviceClass (devices.nfdctl.io), wherever it enters: the API object, the agent's
 * on-disk copy, a class file. Pure; issues are data, never thrown. Defaults: permissions rw, allocation
 * Class, capacity 1. deploy/crds/deviceclasses.devices.nfdctl.io.yaml enforces the same rules where a CRD
 * schema and CEL can; globs are checked only here.
 */
export function validateDeviceClass(value: unknown): DeviceClassValidation {
  const issues: ValidationIssue[] = []
  const report: Report = (path, message) => {
    issues.push({message, path})
  }
  if (!isRecord(value)) {
    report('', `must be a DeviceClass (devices.nfdctl.io/v1alpha1) mapping with apiVersion, kind, metadata and spec (got ${got(value)})`)
    return {issues, ok: false}
  }
  checkTypeMeta(value, report)
  const metadata = checkMetadata(value.metadata, report)
  const spec = checkSpec(value.spec, report)
  // status is the agents' output, never input: ignored.
  if (issues.length > 0 || metadata === undefined || spec === undefined) return {issues, ok: false}
  return {deviceClass: {apiVersion: deviceClassApiVersion, kind: 'DeviceClass', metadata, spec}, ok: true}
}

function checkTypeMeta(object: Record<string, unknown>, report: Report): void {
  const {apiVersion, kind} = object
  if (apiVersion === undefined || apiVersion === null) report('apiVersion', `required; set apiVersion: ${deviceClassApiVersion}`)
  else if (typeof apiVersion === 'string' && apiVersion.startsWith('resource.k8s.io/')) {
    // The one mix-up worth naming: kubectl get deviceclass often answers with the DRA kind.
    report('apiVersion', `must be ${deviceClassApiVersion} (got ${got(apiVersion)}): resource.k8s.io is the unrelated Kubernetes DRA DeviceClass; nfdctl reads DeviceClass (devices.nfdctl.io)`)
  } else if (apiVersion !== deviceClassApiVersion) report('apiVersion', `must be ${deviceClassApiVersion} (got ${got(apiVersion)})`)
  if (kind === undefined || kind === null) report('kind', 'required; set kind: DeviceClass')
  else if (kind !== 'DeviceClass') report('kind', `must be DeviceClass (got ${got(kind)})`)
}

function checkMetadata(value: unknown, report: Report): DeviceClass['metadata'] | undefined {
  if (value === undefined || value === null) {
    report('metadata', 'required: a mapping with the class name')
    return undefined
  }
  if (!isRecord(value)) {
    report('metadata', `must be a mapping with the class name (got ${got(value)})`)
    return undefined
  }
  const {generation, name, uid} = value
  if (name === undefined || name === null) {
    report('metadata.name', 'required; it names the kubelet resource devices.nfdctl.io/<name>')
    return undefined
  }
  if (typeof name !== 'string') {
    report('metadata.name', `must be a string (got ${got(name)})`)
    return undefined
  }
  let ok = true
  if (!dnsSubdomainPattern.test(name)) {
    report('metadata.name', `must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (got ${got(name)})`)
    ok = false
  }
  if (name.length > maxClassName) {
    report('metadata.name', `must be at most ${maxClassName} characters, as it becomes the kubelet resource devices.nfdctl.io/<name> (got ${name.length})`)
    ok = false
  }
  if (!ok) return undefined
  // Server-set fields ride along for status writes; anything else in metadata is not ours to judge.
  return {
    name,
    ...(Number.isInteger(generation) ? {generation: generation as number} : {}),
    ...(typeof uid === 'string' ? {uid} : {}),
  }
}

function checkSpec(value: unknown, report: Report): DeviceClassSpec | undefined {
  if (value === undefined || value === null) {
    report('spec', 'required: a mapping with match (the device rules) and optionally nodeSelector, permissions, allocation, capacity')
    return undefined
  }
  if (!isRecord(value)) {
    report('spec', `must be a mapping with match and optionally nodeSelector, permissions, allocation, capacity (got ${got(value)})`)
    return undefined
  }
  rejectUnknown(value, 'spec', specFields, 'spec', report)
  const match = checkMatch(value.match, report)
  const nodeSelector = isAbsent(value.nodeSelector) ? undefined : checkLabelSelector(value.nodeSelector, 'spec.nodeSelector', report)
  const selectorOk = isAbsent(value.nodeSelector) || nodeSelector !== undefined
  const permissions = valueOr(value.permissions, deviceClassDefaults.permissions)
  const permissionsOk = typeof permissions === 'string' && /^[rwm]{1,3}$/.test(permissions) && new Set(permissions).size === permissions.length
  if (!permissionsOk) report('spec.permissions', `must be letters from r, w, m, each once (got ${got(permissions)})`)
  const allocation = valueOr(value.allocation, deviceClassDefaults.allocation)
  const allocationOk = isOneOf(allocations, allocation)
  if (!allocationOk) report('spec.allocation', `must be Class or Device (got ${got(allocation)})`)
  const capacity = valueOr(value.capacity, deviceClassDefaults.capacity)
  const capacityOk = Number.isInteger(capacity) && (capacity as number) >= 1
  if (!capacityOk) report('spec.capacity', `must be a whole number >= 1 (got ${got(capacity)})`)
  if (!isAbsent(value.capacity) && allocation === 'Device') {
    report('spec.capacity', 'capacity applies only to allocation Class; remove it (each device is one unit) or set allocation: Class')
  }
  if (match === undefined || !selectorOk || !permissionsOk || !allocationOk || !capacityOk) return undefined
  return {
    allocation,
    capacity: capacity as number,
    match,
    ...(nodeSelector === undefined ? {} : {nodeSelector}),
    permissions,
  }
}

function checkMatch(value: unknown, report: Report): MatchRule[] | undefined {
  const path = 'spec.match'
  if (value === undefined || value === null) {
    report(path, 'required: a list of rules, at least one (a device is in the class when any rule matches)')
    return undefined
  }
  if (!Array.isArray(value)) {
    report(path, `must be a list of rules (got ${got(value)})`)
    return undefined
  }
  if (value.length === 0) {
    report(path, 'must have at least one rule, such as {subsystem: tty, devName: "ttyUSB*"}')
    return undefined
  }
  const rules = value.map((rule, i) => checkRule(rule, `${path}[${i}]`, report))
  return rules.every((r) => r !== undefined) ? rules : undefined
}

function checkRule(value: unknown, path: string, report: Report): MatchRule | undefined {
  if (!isRecord(value)) {
    report(path, `must be a mapping with at least one of ${ruleFields.join(', ')} (got ${got(value)})`)
    return undefined
  }
  let ok = rejectUnknown(value, path, ruleFields, 'a match rule', report)
  if (ruleFields.every((field) => value[field] === undefined)) {
    report(path, `needs at least one of ${ruleFields.join(', ')}`)
    ok = false
  }
  const rule: {-readonly [K in keyof MatchRule]: MatchRule[K]} = {}
  const {attributes, devName, properties, subsystem} = value
  if (subsystem !== undefined) {
    if (typeof subsystem === 'string' && subsystem.length > 0) rule.subsystem = subsystem
    else ok = fail(report, `${path}.subsystem`, `must be a non-empty string such as "tty" (got ${got(subsystem)})`)
  }
  if (devName !== undefined) {
    if (checkGlob(devName, `${path}.devName`, '"ttyUSB*"', report)) rule.devName = devName as string
    else ok = false
  }
  if (properties !== undefined) {
    const map = checkGlobMap(properties, `${path}.properties`, 'property', '{ID_VENDOR_ID: "0403"}', report)
    if (map) rule.properties = map
    else ok = false
  }
  if (attributes !== undefined) {
    const map = checkGlobMap(attributes, `${path}.attributes`, 'attribute', '{idVendor: "0403"}', report)
    if (map) rule.attributes = map
    else ok = false
  }
  return ok ? rule : undefined
}

function checkGlobMap(value: unknown, path: string, what: string, example: string, report: Report): Record<string, string> | undefined {
  if (!isRecord(value)) {
    report(path, `must be a mapping of ${what} names to globs, such as ${example} (got ${got(value)})`)
    return undefined
  }
  const entries = Object.entries(value)
  if (entries.length === 0) {
    report(path, `must name at least one ${what}, such as ${example}; or remove it`)
    return undefined
  }
  let ok = true
  for (const [key, glob] of entries) {
    if (key.length === 0) ok = fail(report, childPath(path, key), `${what} names must not be empty`)
    if (!checkGlob(glob, childPath(path, key), '"0403"', report)) ok = false
  }
  return ok ? Object.fromEntries(entries as Array<[string, string]>) : undefined
}

/** A non-empty string that compiles as a glob; brackets must balance (the matcher would read them literally). */
function checkGlob(value: unknown, path: string, example: string, report: Report): boolean {
  if (typeof value !== 'string' || value.length === 0) {
    // YAML reads an unquoted 0403 as the number 403: the usual way a vendor id goes wrong.
    const hint = typeof value === 'number' ? `; quote it in YAML, such as ${example}` : `, such as ${example}`
    return fail(report, path, `must be a non-empty glob string${hint} (got ${got(value)})`)
  }
  const problem = globProblem(value)
  return problem === undefined || fail(report, path, `is not a valid glob (got ${got(value)}): ${problem}`)
}

function globProblem(glob: string): string | undefined {
  let regex: RegExp
  try {
    regex = picomatch.makeRe(glob, {dot: true, strictBrackets: true})
  } catch (error) {
    const message = errorMessage(error)
    const missing = /Missing (closing|opening): "(.)"/.exec(message)
    if (!missing) return message
    // picomatch names the missing character: "]" when a "[" is never closed, "[" when a "]" has no opening.
    const [, side, missingChar] = missing
    const pair: Record<string, string> = {'(': ')', ')': '(', '[': ']', ']': '[', '{': '}', '}': '{'}
    const present = pair[missingChar]
    return side === 'closing'
      ? `"${present}" is never closed; close it with "${missingChar}" or write \\${present} for a literal "${present}"`
      : `"${present}" has no opening "${missingChar}"; write \\${present} for a literal "${present}"`
  }
  // picomatch answers a pattern it cannot turn into a regular expression with one that matches nothing.
  return regex.source === '$^' ? 'it does not compile; is there a lone "\\" at the end?' : undefined
}

function checkLabelSelector(value: unknown, path: string, report: Report): LabelSelector | undefined {
  if (!isRecord(value)) {
    report(path, `must be a LabelSelector mapping with matchLabels and/or matchExpressions (got ${got(value)})`)
    return undefined
  }
  let ok = rejectUnknown(value, path, selectorFields, 'a LabelSelector', report)
  const {matchExpressions, matchLabels} = value
  const selector: {-readonly [K in keyof LabelSelector]: LabelSelector[K]} = {}
  if (!isAbsent(matchLabels)) {
    const labels = checkMatchLabels(matchLabels, `${path}.matchLabels`, report)
    if (labels) selector.matchLabels = labels
    else ok = false
  }
  if (!isAbsent(matchExpressions)) {
    if (Array.isArray(matchExpressions)) {
      const expressions = matchExpressions.map((e, i) => checkExpression(e, `${path}.matchExpressions[${i}]`, report))
      if (expressions.every((e) => e !== undefined)) selector.matchExpressions = expressions
      else ok = false
    } else ok = fail(report, `${path}.matchExpressions`, `must be a list of {key, operator, values} (got ${got(matchExpressions)})`)
  }
  return ok ? selector : undefined
}

function checkMatchLabels(value: unknown, path: string, report: Report): Record<string, string> | undefined {
  if (!isRecord(value)) {
    report(path, `must be a mapping of label keys to values (got ${got(value)})`)
    return undefined
  }
  let ok = true
  for (const [key, labelValue] of Object.entries(value)) {
    const problem = labelKeyProblem(key)
    if (problem) ok = fail(report, childPath(path, key), `${problem} (got ${got(key)})`)
    if (!checkLabelValue(labelValue, childPath(path, key), report)) ok = false
  }
  return ok ? {...(value as Record<string, string>)} : undefined
}

function checkExpression(value: unknown, path: string, report: Report): LabelExpression | undefined {
  if (!isRecord(value)) {
    report(path, `must be a mapping {key, operator, values} (got ${got(value)})`)
    return undefined
  }
  let ok = rejectUnknown(value, path, expressionFields, 'a selector expression', report)
  const {key, operator, values} = value
  if (typeof key !== 'string') ok = fail(report, `${path}.key`, isAbsent(key) ? 'required: the label key to test' : `must be a label key string (got ${got(key)})`)
  else {
    const problem = labelKeyProblem(key)
    if (problem) ok = fail(report, `${path}.key`, `${problem} (got ${got(key)})`)
  }
  if (!isOneOf(operators, operator)) {
    ok = fail(report, `${path}.operator`, isAbsent(operator) ? `required: one of ${operators.join(', ')}` : `must be one of ${operators.join(', ')} (got ${got(operator)})`)
  }
  let list: string[] | undefined
  if (!isAbsent(values)) {
    if (Array.isArray(values)) {
      const valid = values.map((v, i) => checkLabelValue(v, `${path}.values[${i}]`, report))
      if (valid.every(Boolean)) list = [...(values as string[])]
      else ok = false
    } else ok = fail(report, `${path}.values`, `must be a list of label values (got ${got(values)})`)
  }
  const count = Array.isArray(values) ? values.length : 0
  if ((operator === 'In' || operator === 'NotIn') && count === 0) ok = fail(report, `${path}.values`, `operator ${operator} needs at least one value`)
  if ((operator === 'Exists' || operator === 'DoesNotExist') && count > 0) ok = fail(report, `${path}.values`, `operator ${operator} takes no values; remove values`)
  if (!ok || typeof key !== 'string' || !isOneOf(operators, operator)) return undefined
  return {key, operator, ...(list === undefined ? {} : {values: list})}
}

function checkLabelValue(value: unknown, path: string, report: Report): boolean {
  if (typeof value !== 'string') {
    // YAML reads unquoted true, 1 or 2.0 as non-strings; label values are always strings.
    return fail(report, path, `must be a string label value; quote it in YAML, such as "true" (got ${got(value)})`)
  }
  const problem = labelValueProblem(value)
  return problem === undefined || fail(report, path, `${problem} (got ${got(value)})`)
}

/** Reports each field not in `known` at its own path; returns false when there was one. */
function rejectUnknown(object: Record<string, unknown>, path: string, known: readonly string[], what: string, report: Report): boolean {
  let ok = true
  for (const key of Object.keys(object)) {
    if (known.includes(key)) continue
    // Catch the usual slips: case (devname) and a plural (value for values).
    const near = known.find((k) => stem(k) === stem(key))
    ok = fail(report, childPath(path, key), `unknown field; ${what} takes ${known.join(', ')}${near ? ` (did you mean ${near}?)` : ''}`)
  }
  return ok
}

function stem(field: string): string {
  return field.toLowerCase().replace(/s$/, '')
}

function fail(report: Report, path: string, message: string): false {
  report(path, message)
  return false
}

/** `spec.match[0].properties.ID_VENDOR_ID`, or `matchLabels["kubernetes.io/arch"]` for keys that are not plain words. */
function childPath(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`
}

/** How a wrong value is shown in a message: always on one line, and short. */
function got(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value)
  if (typeof value === 'number') return `the number ${value}`
  if (typeof value === 'boolean') return `the boolean ${value}`
  if (value === null || value === undefined) return 'nothing'
  return Array.isArray(value) ? 'a list' : 'a mapping'
}

// A field written with no value (YAML `permissions:`) gets its default, as the API server does.
function valueOr(value: unknown, fallback: string | number): unknown {
  return isAbsent(value) ? fallback : value
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isOneOf<T extends string>(options: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (options as readonly string[]).includes(value)
}
