import {deviceClassDefaults, deviceClassSchema, type SchemaKeyword, type SchemaNode} from './device-class-schema.js'
import {dnsSubdomainPattern} from './label-selector.js'
import {deviceClassApiVersion, type DeviceClass, type DeviceClassSpec, type ValidationIssue} from './types.js'

/** The class with its defaults applied, or every issue found, each at its field path. */
export type DeviceClassValidation = {ok: true; deviceClass: DeviceClass} | {ok: false; issues: ValidationIssue[]}

type Segment = number | string
interface Issue {
  readonly at: readonly Segment[]
  readonly message: string
}

/**
 * The one check of a DeviceClass (devices.nfdctl.io), wherever it enters: the API object, the agent's
 * on-disk copy, a class file. Pure; issues are data, never thrown, in document order. It checks against
 * deviceClassSchema, from which the CRD is generated, as the API server does: fields written with no value
 * (null) dropped, unknown fields pruned, defaults applied, then the schema's keywords and its CEL rules
 * (by their TypeScript twins). Stricter than the server where a file deserves it: unknown fields are
 * reported, globs must compile, and apiVersion, kind and metadata.name, which the server checks itself,
 * are checked here too. Defaults: permissions rw, allocation Class, capacity 1.
 */
export function validateDeviceClass(value: unknown): DeviceClassValidation {
  if (!isRecord(value)) {
    return {issues: [{message: `must be a DeviceClass (${deviceClassApiVersion}) mapping with apiVersion, kind, metadata and spec (got ${got(value)})`, path: ''}], ok: false}
  }
  // apiVersion and kind are checked by hand, more strictly; status is the agents' output, never input.
  const {apiVersion: _apiVersion, kind: _kind, status: _status, ...input} = value
  const issues = [...typeMetaIssues(value), ...metadataIssues(value.metadata)]
  const checked = visit(input, deviceClassSchema, [], issues) as {metadata: {name: string}; spec: Omit<DeviceClassSpec, 'capacity'> & {capacity?: number}}
  if (issues.length > 0) return {issues: dedupe(issues).map((i) => ({message: i.message, path: pathOf(i.at)})), ok: false}
  const {generation, uid} = value.metadata as Record<string, unknown>
  return {
    deviceClass: {
      apiVersion: deviceClassApiVersion,
      kind: 'DeviceClass',
      // Server-set fields ride along for status writes; anything else in metadata is not ours to judge.
      metadata: {
        name: checked.metadata.name,
        ...(Number.isInteger(generation) ? {generation: generation as number} : {}),
        ...(typeof uid === 'string' ? {uid} : {}),
      },
      spec: {...checked.spec, capacity: checked.spec.capacity ?? deviceClassDefaults.capacity},
    },
    ok: true,
  }
}

// The API server checks these itself (the endpoint, and ObjectMeta); the CRD cannot state them.
function typeMetaIssues(object: Record<string, unknown>): Issue[] {
  const {apiVersion, kind} = object
  const issues: Issue[] = []
  if (isAbsent(apiVersion)) issues.push({at: ['apiVersion'], message: `required; set apiVersion: ${deviceClassApiVersion}`})
  else if (typeof apiVersion === 'string' && apiVersion.startsWith('resource.k8s.io/')) {
    // The one mix-up worth naming: kubectl get deviceclass often answers with the DRA kind.
    issues.push({
      at: ['apiVersion'],
      message: `must be ${deviceClassApiVersion} (got ${got(apiVersion)}): resource.k8s.io is the unrelated Kubernetes DRA DeviceClass; nfdctl reads DeviceClass (devices.nfdctl.io)`,
    })
  } else if (apiVersion !== deviceClassApiVersion) issues.push({at: ['apiVersion'], message: `must be ${deviceClassApiVersion} (got ${got(apiVersion)})`})
  if (isAbsent(kind)) issues.push({at: ['kind'], message: 'required; set kind: DeviceClass'})
  else if (kind !== 'DeviceClass') issues.push({at: ['kind'], message: `must be DeviceClass (got ${got(kind)})`})
  return issues
}

function metadataIssues(metadata: unknown): Issue[] {
  if (isAbsent(metadata)) return [{at: ['metadata'], message: 'required: a mapping with the class name'}]
  if (!isRecord(metadata)) return [] // the schema's type error
  const {name} = metadata
  if (isAbsent(name)) return [{at: ['metadata', 'name'], message: 'required; it names the kubelet resource devices.nfdctl.io/<name>'}]
  if (typeof name !== 'string' || dnsSubdomainPattern.test(name)) return []
  return [{at: ['metadata', 'name'], message: `must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (got ${got(name)})`}]
}

/**
 * Checks a value against a schema node, adding its issues in document order, and returns the value as the
 * API server validates and stores it: fields written with no value (null) dropped, unknown fields pruned
 * (and reported where the node names them mistakes), defaults applied. Then the node's CEL rules run, by
 * their TypeScript twins, on that value, and its x-nfdctl-checks.
 */
function visit(value: unknown, node: SchemaNode, at: readonly Segment[], issues: Issue[]): unknown {
  const fail = (keyword: SchemaKeyword, limit?: number): void => {
    issues.push({at, message: messageFor(node, keyword, value, limit)})
  }
  if (!hasType(value, node.type)) {
    fail('type')
    return value
  }
  let checked = value
  if (typeof value === 'string') {
    if (node.enum && !node.enum.includes(value)) fail('enum')
    if (node.pattern !== undefined && !new RegExp(node.pattern).test(value)) fail('pattern')
    // Kubernetes counts characters, not UTF-16 units.
    const length = [...value].length
    if (node.minLength !== undefined && length < node.minLength) fail('minLength', node.minLength)
    if (node.maxLength !== undefined && length > node.maxLength) fail('maxLength', node.maxLength)
  } else if (typeof value === 'number') {
    if (node.minimum !== undefined && value < node.minimum) fail('minimum', node.minimum)
  } else if (Array.isArray(value)) {
    if (node.minItems !== undefined && value.length < node.minItems) fail('minItems', node.minItems)
    if (node.maxItems !== undefined && value.length > node.maxItems) fail('maxItems', node.maxItems)
    const {items} = node
    checked = items === undefined ? value : value.map((item, i) => visit(item, items, [...at, i], issues))
  } else if (isRecord(value)) {
    checked = visitObject(value, node, at, issues)
  }
  for (const rule of [...(node['x-kubernetes-validations'] ?? []), ...(node['x-nfdctl-checks'] ?? [])]) {
    for (const issue of rule.check(checked)) {
      const below = issue.at ?? []
      issues.push({at: [...at, ...below], message: fill(issue.message, {value: valueAt(checked, below)})})
    }
  }
  return checked
}

function visitObject(value: Record<string, unknown>, node: SchemaNode, at: readonly Segment[], issues: Issue[]): Record<string, unknown> {
  const {additionalProperties, properties} = node
  let checked: Record<string, unknown>
  if (properties === undefined)
    checked = {...value} // a map: every key is data
  else {
    const known = Object.keys(properties)
    const fieldsOf = node['x-nfdctl-text']?.fieldsOf
    for (const key of Object.keys(value)) {
      if (known.includes(key) || fieldsOf === undefined) continue
      // Catch the usual slips: case (devname) and a plural (value for values).
      const near = known.find((k) => stem(k) === stem(key))
      issues.push({at: [...at, key], message: `unknown field; ${fieldsOf} takes ${known.join(', ')}${near ? ` (did you mean ${near}?)` : ''}`})
    }
    checked = {}
    for (const key of known) {
      if (!isAbsent(value[key])) checked[key] = value[key]
      else if (properties[key].default !== undefined) checked[key] = properties[key].default
    }
  }
  const count = Object.keys(checked).length
  if (node.minProperties !== undefined && count < node.minProperties) issues.push({at, message: messageFor(node, 'minProperties', checked, node.minProperties)})
  if (node.maxProperties !== undefined && count > node.maxProperties) issues.push({at, message: messageFor(node, 'maxProperties', checked, node.maxProperties)})
  if (properties === undefined) {
    for (const [key, field] of Object.entries(checked)) {
      if (additionalProperties !== undefined) checked[key] = visit(field, additionalProperties, [...at, key], issues)
    }
  }
  for (const [key, child] of Object.entries(properties ?? {})) {
    if (Object.hasOwn(checked, key)) checked[key] = visit(checked[key], child, [...at, key], issues)
    else if (node.required?.includes(key)) {
      const text = child['x-nfdctl-text']
      issues.push({at: [...at, key], message: text?.required ?? `required: ${text?.is ?? 'set it'}`})
    }
  }
  return checked
}

function hasType(value: unknown, type: SchemaNode['type']): boolean {
  if (type === 'array') return Array.isArray(value)
  if (type === 'integer') return Number.isInteger(value)
  if (type === 'object') return isRecord(value)
  return typeof value === 'string'
}

/** The field's own wording (x-nfdctl-text) for a failed keyword. */
function messageFor(node: SchemaNode, keyword: SchemaKeyword, value: unknown, limit?: number): string {
  const text = node['x-nfdctl-text']
  const override = text?.on?.[keyword]
  const template = typeof override === 'function' ? override(value) : (override ?? countMessages[keyword] ?? `must be ${text?.is ?? describe(node)} (got {got})`)
  return fill(template, {limit, node, value})
}

const countMessages: Partial<Record<SchemaKeyword, string>> = {
  maxItems: 'must have at most {limit} items (got {count})',
  maxProperties: 'must have at most {limit} entries (got {count})',
  minItems: 'must have at least {limit} items',
  minProperties: 'must have at least {limit} entries',
}

function describe(node: SchemaNode): string {
  if (node.enum) return `one of ${node.enum.join(', ')}`
  return {array: 'a list', integer: 'a whole number', object: 'a mapping', string: 'a string'}[node.type]
}

function fill(template: string, context: {limit?: number; node?: SchemaNode; value: unknown}): string {
  const {limit, node, value} = context
  const count = Array.isArray(value) ? value.length : isRecord(value) ? Object.keys(value).length : 0
  return template.replaceAll(/\{(count|fields|got|length|limit)\}/g, (_, name: string) => {
    if (name === 'got') return got(value)
    if (name === 'length') return String(typeof value === 'string' ? [...value].length : 0)
    if (name === 'count') return String(count)
    if (name === 'limit') return String(limit)
    return Object.keys(node?.properties ?? {}).join(', ')
  })
}

function valueAt(value: unknown, at: readonly Segment[]): unknown {
  let here = value
  for (const segment of at) here = Array.isArray(here) || isRecord(here) ? (here as Record<Segment, unknown>)[segment] : undefined
  return here
}

/** `spec.match[0].properties.ID_VENDOR_ID`, or `matchLabels["kubernetes.io/arch"]` for keys that are not plain words. */
function pathOf(at: readonly Segment[]): string {
  return at
    .map((segment, i) => {
      if (typeof segment === 'number') return `[${segment}]`
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)) return `[${JSON.stringify(segment)}]`
      return i === 0 ? segment : `.${segment}`
    })
    .join('')
}

function dedupe(issues: readonly Issue[]): Issue[] {
  const seen = new Set<string>()
  return issues.filter((issue) => {
    const key = `${pathOf(issue.at)}\n${issue.message}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

function stem(field: string): string {
  return field.toLowerCase().replace(/s$/, '')
}

/** How a wrong value is shown in a message: always on one line, and short. */
function got(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value)
  if (typeof value === 'number') return `the number ${value}`
  if (typeof value === 'boolean') return `the boolean ${value}`
  if (value === null || value === undefined) return 'nothing'
  return Array.isArray(value) ? 'a list' : 'a mapping'
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
