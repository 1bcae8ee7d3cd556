import {fileURLToPath} from 'node:url'

import {expect} from 'chai'
import protobuf from 'protobufjs'

import {
  claimRefFields,
  claimsRequestFields,
  healthStatuses,
  nodePrepareResourcesResponseFields,
  nodeUnprepareResourcesResponseFields,
  nodeWatchResourcesResponseFields,
  pluginInfoFields,
  preparedDeviceMessageFields,
  registrationStatusFields,
} from '../../src/lib/kubelet/dra-api.js'
import {
  allocateRequestFields,
  allocateResponseFields,
  containerAllocateResponseFields,
  devicePluginOptionsFields,
  deviceSpecFields,
  listAndWatchResponseFields,
  listPodResourcesResponseFields,
  pluginDeviceFields,
  podResourcesFields,
  preferredAllocationRequestFields,
  preferredAllocationResponseFields,
  registerRequestFields,
} from '../../src/lib/kubelet/device-plugin-api.js'
import {taskStatuses, wireContainerFields, wireEnvelopeFields, wireProcessFields} from '../../src/lib/runtime/containerd-client.js'

/** Proto fields the hand-written types leave out on purpose (nfdctl neither reads nor sets them), by message. */
type LeftOut = Readonly<Record<string, readonly string[]>>

/**
 * How the fields of a hand-written message type (a `*Fields` value, see src/lib/proto-fields.ts) differ from
 * the .proto's message, named by where they are: names as the protos spell them (the code loads them with
 * keepCase), each field's kind, repeated or map, nested messages in turn. Empty when they agree.
 */
function drift(type: protobuf.Type, fields: object, leftOut: LeftOut, visited = new Set<string>(), path = type.name): string[] {
  const name = type.fullName.slice(1)
  visited.add(name)
  const shapes = fields as Record<string, unknown>
  const skipped = leftOut[name] ?? []
  const problems: string[] = []
  for (const [field, shape] of Object.entries(shapes)) {
    const found = type.fields[field]
    if (found === undefined) problems.push(`${path}.${field}: in the TypeScript type, not in the .proto's ${name}`)
    else problems.push(...fieldDrift(found, shape, leftOut, visited, `${path}.${field}`))
  }
  for (const field of type.fieldsArray) {
    if (!(field.name in shapes) && !skipped.includes(field.name)) problems.push(`${path}.${field.name} (= ${field.id}): in the .proto, neither in the TypeScript type nor left out`)
  }
  for (const field of skipped) {
    if (field in shapes || type.fields[field] === undefined) problems.push(`${path}.${field}: left out, but ${field in shapes ? 'the TypeScript type has it' : `${name} has no such field`}`)
  }
  return problems
}

function fieldDrift(field: protobuf.Field, shape: unknown, leftOut: LeftOut, visited: Set<string>, path: string): string[] {
  const [container, single] = Array.isArray(shape) ? (shape as [string, unknown]) : ['single', shape]
  const protoContainer = field.map ? 'map' : field.repeated ? 'repeated' : 'single'
  if (container !== protoContainer) return [`${path} (= ${field.id}): ${container} in the TypeScript type, ${protoContainer} in the .proto`]
  if (field instanceof protobuf.MapField && field.keyType !== 'string') return [`${path} (= ${field.id}): a map keyed by ${field.keyType} in the .proto, by string in the TypeScript type`]
  const resolved = field.resolvedType
  if (resolved instanceof protobuf.Type) {
    if (typeof single === 'object' && single !== null) return drift(resolved, single, leftOut, visited, path)
    return [`${path} (= ${field.id}): ${String(single)} in the TypeScript type, message ${resolved.name} in the .proto`]
  }
  const kind = resolved instanceof protobuf.Enum ? 'string' : scalarKinds[field.type]
  return single === kind ? [] : [`${path} (= ${field.id}): ${typeof single === 'string' ? single : 'a message'} in the TypeScript type, ${field.type} (${kind}) in the .proto`]
}

/** A scalar's kind in JavaScript as proto-loader gives it (`longs: Number`). */
const scalarKinds: Readonly<Record<string, string>> = {
  bool: 'boolean',
  bytes: 'bytes',
  double: 'number',
  fixed32: 'number',
  fixed64: 'number',
  float: 'number',
  int32: 'number',
  int64: 'number',
  sfixed32: 'number',
  sfixed64: 'number',
  sint32: 'number',
  sint64: 'number',
  string: 'string',
  uint32: 'number',
  uint64: 'number',
}

/** One .proto file alone (dra-health v1 shares its package `v1` with PodResources v1), names kept as spelled. */
function load(file: string): protobuf.Root {
  const root = new protobuf.Root().loadSync(fileURLToPath(new URL(`../../proto/${file}`, import.meta.url)), {keepCase: true})
  root.resolveAll()
  return root
}

const dra = (version: string): Array<[string, string, object]> => [
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.Claim`, claimRefFields],
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.NodePrepareResourcesRequest`, claimsRequestFields],
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.NodePrepareResourcesResponse`, nodePrepareResourcesResponseFields],
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.Device`, preparedDeviceMessageFields],
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.NodeUnprepareResourcesRequest`, claimsRequestFields],
  [`kubelet/dra-${version}.proto`, `k8s.io.kubelet.pkg.apis.dra.${version}.NodeUnprepareResourcesResponse`, nodeUnprepareResourcesResponseFields],
]

/** Each hand-written message type with the .proto file and message it stands for. */
const messages: Array<[file: string, message: string, fields: object]> = [
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.DevicePluginOptions', devicePluginOptionsFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.RegisterRequest', registerRequestFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.Device', pluginDeviceFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.ListAndWatchResponse', listAndWatchResponseFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.PreferredAllocationRequest', preferredAllocationRequestFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.PreferredAllocationResponse', preferredAllocationResponseFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.AllocateRequest', allocateRequestFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.DeviceSpec', deviceSpecFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.ContainerAllocateResponse', containerAllocateResponseFields],
  ['kubelet/deviceplugin-v1beta1.proto', 'v1beta1.AllocateResponse', allocateResponseFields],
  ['kubelet/podresources-v1.proto', 'v1.PodResources', podResourcesFields],
  ['kubelet/podresources-v1.proto', 'v1.ListPodResourcesResponse', listPodResourcesResponseFields],
  ...dra('v1'),
  ...dra('v1beta1'),
  ['kubelet/pluginregistration-v1.proto', 'pluginregistration.PluginInfo', pluginInfoFields],
  ['kubelet/pluginregistration-v1.proto', 'pluginregistration.RegistrationStatus', registrationStatusFields],
  ['kubelet/dra-health-v1.proto', 'v1.NodeWatchResourcesResponse', nodeWatchResourcesResponseFields],
  ['kubelet/dra-health-v1alpha1.proto', 'v1alpha1.NodeWatchResourcesResponse', nodeWatchResourcesResponseFields],
  ['containerd/containers.proto', 'containerd.services.containers.v1.Container', wireContainerFields],
  ['containerd/tasks.proto', 'containerd.services.tasks.v1.Process', wireProcessFields],
  ['containerd/events.proto', 'containerd.services.events.v1.Envelope', wireEnvelopeFields],
]

/** Each enum a hand-written type spells out, with its names in the order of their numbers. */
const enums: Array<[file: string, name: string, values: readonly string[]]> = [
  ['kubelet/dra-health-v1.proto', 'v1.HealthStatus', healthStatuses],
  ['kubelet/dra-health-v1alpha1.proto', 'v1alpha1.HealthStatus', healthStatuses],
  ['containerd/tasks.proto', 'containerd.services.tasks.v1.Status', taskStatuses],
]

const leftOut: LeftOut = {
  'containerd.services.containers.v1.Container': ['image', 'runtime', 'snapshotter', 'snapshot_key', 'created_at', 'updated_at', 'extensions', 'sandbox'],
  'containerd.services.events.v1.Envelope': ['timestamp'],
  'containerd.services.tasks.v1.Process': ['stdin', 'stdout', 'stderr', 'terminal', 'exit_status', 'exited_at'],
  'k8s.io.kubelet.pkg.apis.dra.v1.Device': ['share_id'],
  'v1.ContainerDevices': ['topology'],
  'v1.ContainerResources': ['cpu_ids', 'memory', 'dynamic_resources'],
  'v1.PodResources': ['cpu_ids', 'memory'],
  'v1beta1.Device': ['topology'],
}

describe('proto message types', function () {
  const roots = new Map<string, protobuf.Root>()
  const rootOf = (file: string): protobuf.Root => roots.get(file) ?? roots.set(file, load(file)).get(file)!

  for (const [file, message, fields] of messages) {
    it(`${message} (${file}) has the hand-written type's fields`, function () {
      expect(drift(rootOf(file).lookupType(message), fields, leftOut)).to.deep.equal([])
    })
  }

  for (const [file, name, values] of enums) {
    it(`${name} (${file}) has the names the TypeScript type spells out`, function () {
      const numbered = rootOf(file).lookupEnum(name).values
      expect(Object.keys(numbered).sort((a, b) => numbered[a] - numbered[b])).to.deep.equal(values)
    })
  }

  it('leaves out fields of messages the types stand for only', function () {
    const visited = new Set<string>()
    for (const [file, message, fields] of messages) drift(rootOf(file).lookupType(message), fields, leftOut, visited)
    expect(Object.keys(leftOut).filter((name) => !visited.has(name))).to.deep.equal([])
  })
})

describe('proto message drift', function () {
  const proto = `syntax = "proto3";
    package t;
    enum Health { UNKNOWN = 0; HEALTHY = 1; }
    message Inner { string name = 1; int64 size = 2; }
    message Outer {
      string id = 1;
      repeated string ids = 2;
      map<string, string> labels = 3;
      Inner inner = 4;
      repeated Inner inners = 5;
      map<string, Inner> byName = 6;
      Health health = 7;
      bytes value = 8;
      bool ready = 9;
    }`
  const root = protobuf.parse(proto, {keepCase: true}).root
  root.resolveAll()
  const outer = root.lookupType('t.Outer')
  const inner = {name: 'string', size: 'number'}
  const agreeing = {
    byName: ['map', inner],
    health: 'string',
    id: 'string',
    ids: ['repeated', 'string'],
    inner,
    inners: ['repeated', inner],
    labels: ['map', 'string'],
    ready: 'boolean',
    value: 'bytes',
  }

  it('finds none when the fields agree', function () {
    expect(drift(outer, agreeing, {})).to.deep.equal([])
  })

  const {id: _id, ...withoutId} = agreeing
  const cases: Array<{what: string; fields: object; leftOut?: LeftOut; problems: string[]}> = [
    {
      fields: {...withoutId, ident: 'string'},
      problems: ["Outer.ident: in the TypeScript type, not in the .proto's t.Outer", 'Outer.id (= 1): in the .proto, neither in the TypeScript type nor left out'],
      what: 'a renamed field',
    },
    {fields: {...agreeing, ready: 'string'}, problems: ['Outer.ready (= 9): string in the TypeScript type, bool (boolean) in the .proto'], what: 'a field of another kind'},
    {fields: {...agreeing, id: ['repeated', 'string']}, problems: ['Outer.id (= 1): repeated in the TypeScript type, single in the .proto'], what: 'a single field typed as repeated'},
    {fields: {...agreeing, labels: ['repeated', 'string']}, problems: ['Outer.labels (= 3): repeated in the TypeScript type, map in the .proto'], what: 'a map typed as repeated'},
    {fields: {...agreeing, inner: 'string'}, problems: ['Outer.inner (= 4): string in the TypeScript type, message Inner in the .proto'], what: 'a message typed as a scalar'},
    {
      fields: {...agreeing, byName: ['map', {name: 'string', sizes: 'number'}]},
      problems: ["Outer.byName.sizes: in the TypeScript type, not in the .proto's t.Inner", 'Outer.byName.size (= 2): in the .proto, neither in the TypeScript type nor left out'],
      what: "a renamed field of a map's message",
    },
    {fields: agreeing, leftOut: {'t.Outer': ['ready']}, problems: ['Outer.ready: left out, but the TypeScript type has it'], what: 'a left-out field the type has'},
    {
      fields: agreeing,
      leftOut: {'t.Inner': ['gone']},
      problems: ['inner', 'inners', 'byName'].map((field) => `Outer.${field}.gone: left out, but t.Inner has no such field`),
      what: 'a left-out field the .proto lacks',
    },
  ]
  for (const {fields, leftOut, problems, what} of cases) {
    it(`finds ${what}`, function () {
      expect(drift(outer, fields, leftOut ?? {})).to.have.members(problems)
    })
  }

  it('takes a field left out as agreeing', function () {
    const {ready: _ready, ...withoutReady} = agreeing
    expect(drift(outer, withoutReady, {'t.Outer': ['ready']})).to.deep.equal([])
  })
})
