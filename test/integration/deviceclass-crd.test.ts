import {expect} from 'chai'

import {validateDeviceClass} from '../../src/lib/devices/validate-device-class.js'
import {isStatus, KubeApiError} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {adminClient} from '../support/cluster.js'

// The CRD (deploy/crds/deviceclasses.devices.nfdctl.io.yaml) and validateDeviceClass must agree: what the
// API server refuses the validator refuses, and what it stores (with its defaults) the validator accepts.

const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deviceclasses.devices.nfdctl.io'
const prefix = 'crd-test-' // other suites may own DeviceClasses on the shared control plane: touch only ours

type Json = Record<string, unknown>

interface StoredClass {
  metadata: {name: string; generation: number; resourceVersion: string; uid: string}
  spec: Json
  status?: {nodes?: Array<{node: string; devices?: Json[]}>}
}

function deviceClass(name: string, spec: Json = {}, metadata: Json = {}): Json {
  return {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: `${prefix}${name}`, ...metadata}, spec: {match: [{subsystem: 'tty'}], ...spec}}
}

const selector = (nodeSelector: Json): Json => ({nodeSelector})
const expression = (e: Json): Json => selector({matchExpressions: [e]})

describe('DeviceClass (devices.nfdctl.io) CRD against a real kube-apiserver', function () {
  let client: KubeClient
  const created = new Set<string>()

  async function create(body: Json, query?: Record<string, string>): Promise<StoredClass> {
    const stored = await client.request<StoredClass>('POST', classesPath, {body, query})
    created.add(stored.metadata.name)
    return stored
  }

  async function refusal(body: Json, query?: Record<string, string>): Promise<KubeApiError> {
    try {
      await create(body, query)
    } catch (error) {
      if (error instanceof KubeApiError) return error
      throw error
    }
    expect.fail(`the API server accepted ${JSON.stringify(body)}`)
  }

  before(async function () {
    ;({client} = await adminClient(this))
  })

  afterEach(async () => {
    for (const name of created) {
      try {
        await client.request('DELETE', `${classesPath}/${name}`)
      } catch (error) {
        if (!isStatus(error, 'NotFound')) throw error
      }
    }
    created.clear()
  })

  after(() => client?.close())

  describe('both refuse (422 Invalid, and the validator at the same field)', () => {
    const long = 'a'.repeat(64 - prefix.length)
    const cases: Array<[title: string, body: Json, path: string, server: string]> = [
      ['no spec', {...deviceClass('no-spec'), spec: undefined}, 'spec', 'spec: Required value'],
      ['no match', deviceClass('no-match', {match: undefined}), 'spec.match', 'spec.match: Required value'],
      ['no rules', deviceClass('no-rules', {match: []}), 'spec.match', 'should have at least 1 items'],
      ['match a mapping', deviceClass('match-map', {match: {subsystem: 'tty'}}), 'spec.match', 'must be of type array'],
      ['an empty rule', deviceClass('empty-rule', {match: [{}]}), 'spec.match[0]', 'spec.match[0] in body should have at least 1 properties'],
      ['a rule of only an unknown field (pruned, then empty)', deviceClass('unknown-only', {match: [{vendor: '0403'}]}), 'spec.match[0].vendor', 'spec.match[0] in body should have at least 1 properties'],
      ['an empty subsystem', deviceClass('empty-subsystem', {match: [{subsystem: ''}]}), 'spec.match[0].subsystem', 'should be at least 1 chars long'],
      ['an empty devName', deviceClass('empty-devname', {match: [{devName: ''}]}), 'spec.match[0].devName', 'should be at least 1 chars long'],
      ['empty properties', deviceClass('empty-properties', {match: [{properties: {}}]}), 'spec.match[0].properties', 'should have at least 1 properties'],
      ['a numeric property value', deviceClass('numeric-property', {match: [{properties: {ID_VENDOR_ID: 403}}]}), 'spec.match[0].properties.ID_VENDOR_ID', 'must be of type string'],
      ['an empty attribute value', deviceClass('empty-attribute', {match: [{attributes: {idVendor: ''}}]}), 'spec.match[0].attributes.idVendor', 'should be at least 1 chars long'],
      ['permissions rwx', deviceClass('perm-rwx', {permissions: 'rwx'}), 'spec.permissions', 'spec.permissions in body should match'],
      ['permissions rr', deviceClass('perm-rr', {permissions: 'rr'}), 'spec.permissions', 'spec.permissions in body should match'],
      ['empty permissions', deviceClass('perm-empty', {permissions: ''}), 'spec.permissions', 'spec.permissions in body should match'],
      ['allocation in lower case', deviceClass('alloc-lower', {allocation: 'class'}), 'spec.allocation', 'spec.allocation: Unsupported value: "class"'],
      ['capacity 0', deviceClass('cap-0', {capacity: 0}), 'spec.capacity', 'should be greater than or equal to 1'],
      ['a fractional capacity', deviceClass('cap-frac', {capacity: 1.5}), 'spec.capacity', 'spec.capacity in body must be of type'],
      ['capacity with allocation Device', deviceClass('device-cap', {allocation: 'Device', capacity: 2}), 'spec.capacity', 'spec.capacity: Forbidden: capacity applies only to allocation Class'],
      ['capacity 1 with allocation Device', deviceClass('device-cap-1', {allocation: 'Device', capacity: 1}), 'spec.capacity', 'capacity applies only to allocation Class'],
      ['a 64-character name', deviceClass(long), 'metadata.name', 'may not be more than 63'],
      ['an upper-case name', {...deviceClass('x'), metadata: {name: 'Crd-Test-Upper'}}, 'metadata.name', 'RFC 1123 subdomain'],
      ['nodeSelector a string', deviceClass('selector-string', {nodeSelector: 'edge'}), 'spec.nodeSelector', 'must be of type object'],
      ['a label key with a space', deviceClass('label-key', selector({matchLabels: {'bad key': 'x'}})), 'spec.nodeSelector.matchLabels["bad key"]', 'keys must be label keys'],
      ['a label value starting with -', deviceClass('label-value', selector({matchLabels: {usb: '-yes'}})), 'spec.nodeSelector.matchLabels.usb', 'spec.nodeSelector.matchLabels.usb in body should match'],
      ['an unquoted boolean label value', deviceClass('label-bool', selector({matchLabels: {usb: true}})), 'spec.nodeSelector.matchLabels.usb', 'must be of type string'],
      ['an unknown operator', deviceClass('op-unknown', expression({key: 'a', operator: 'Equals', values: ['b']})), 'spec.nodeSelector.matchExpressions[0].operator', 'Unsupported value: "Equals"'],
      ['an expression without key', deviceClass('expr-no-key', expression({operator: 'Exists'})), 'spec.nodeSelector.matchExpressions[0].key', 'spec.nodeSelector.matchExpressions[0].key: Required value'],
      ['an expression key with two /', deviceClass('expr-key', expression({key: 'a/b/c', operator: 'Exists'})), 'spec.nodeSelector.matchExpressions[0].key', 'must be a label key'],
      ['In without values', deviceClass('in-no-values', expression({key: 'a', operator: 'In'})), 'spec.nodeSelector.matchExpressions[0].values', 'operators In and NotIn need at least one value'],
      ['NotIn with empty values', deviceClass('notin-empty', expression({key: 'a', operator: 'NotIn', values: []})), 'spec.nodeSelector.matchExpressions[0].values', 'operators In and NotIn need at least one value'],
      ['Exists with values', deviceClass('exists-values', expression({key: 'a', operator: 'Exists', values: ['b']})), 'spec.nodeSelector.matchExpressions[0].values', 'operators Exists and DoesNotExist take no values'],
      ['DoesNotExist with values', deviceClass('dne-values', expression({key: 'a', operator: 'DoesNotExist', values: ['b']})), 'spec.nodeSelector.matchExpressions[0].values', 'operators Exists and DoesNotExist take no values'],
      ['a bad label value in values', deviceClass('expr-value', expression({key: 'a', operator: 'In', values: ['b c']})), 'spec.nodeSelector.matchExpressions[0].values[0]', 'should match'],
    ]
    for (const [title, body, path, server] of cases) {
      it(`${title}: ${path}`, async () => {
        const result = validateDeviceClass(body)
        expect(result.ok, 'validateDeviceClass accepted it').to.equal(false)
        if (!result.ok) expect(result.issues.map((i) => i.path)).to.include(path)

        const error = await refusal(body)
        expect(isStatus(error, 'Invalid'), `${error.code} ${error.serverMessage}`).to.equal(true)
        expect(error.code).to.equal(422)
        expect(error.serverMessage).to.contain(server)
      })
    }
  })

  it('both refuse unknown fields: the server under fieldValidation=Strict (400), otherwise it prunes them', async () => {
    const body = deviceClass('unknown-fields', {extra: 1, match: [{subsystem: 'tty', vendor: '0403'}]})
    const result = validateDeviceClass(body)
    expect(result.ok ? [] : result.issues.map((i) => i.path)).to.deep.equal(['spec.extra', 'spec.match[0].vendor'])

    const strict = await refusal(body, {fieldValidation: 'Strict'})
    expect(isStatus(strict, 'BadRequest'), strict.message).to.equal(true)
    expect(strict.serverMessage).to.contain('unknown field "spec.extra"').and.contain('unknown field "spec.match[0].vendor"')

    // Without Strict (the API default is Warn) the schema's pruning drops them; the stored object is clean.
    const stored = await create(body)
    expect(stored.spec).to.deep.equal({allocation: 'Class', match: [{subsystem: 'tty'}], permissions: 'rw'})
  })

  it('the Kubernetes DRA apiVersion is refused by the endpoint and named by the validator', async () => {
    const body = {...deviceClass('dra'), apiVersion: 'resource.k8s.io/v1'}
    const result = validateDeviceClass(body)
    expect(result.ok ? '' : result.issues[0].message).to.contain('unrelated Kubernetes DRA DeviceClass')
    const error = await refusal(body)
    expect(isStatus(error, 'BadRequest'), error.message).to.equal(true)
  })

  describe('both accept, and the server applies the same defaults', () => {
    const cases: Array<[title: string, body: Json, defaults: Json]> = [
      ['the smallest class', deviceClass('minimal'), {allocation: 'Class', permissions: 'rw'}],
      ['allocation Device without capacity', deviceClass('device', {allocation: 'Device'}), {allocation: 'Device', permissions: 'rw'}],
      ['every order of r, w, m', deviceClass('perm-mwr', {permissions: 'mwr'}), {allocation: 'Class', permissions: 'mwr'}],
      ['a 63-character name', deviceClass('a'.repeat(63 - prefix.length)), {allocation: 'Class', permissions: 'rw'}],
      ['an escaped bracket in a glob', deviceClass('escaped', {match: [{devName: 'odd\\[name'}]}), {allocation: 'Class', permissions: 'rw'}],
      ['the full example', deviceClass('full', {
        allocation: 'Class',
        capacity: 10,
        match: [{attributes: {idVendor: '0403'}, devName: 'ttyUSB*', properties: {ID_VENDOR_ID: '0403'}, subsystem: 'tty'}, {devName: 'ttyACM[0-9]'}],
        nodeSelector: {
          matchExpressions: [
            {key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64']},
            {key: 'example.com/no-usb', operator: 'DoesNotExist'},
            {key: 'zone', operator: 'Exists', values: []},
          ],
          matchLabels: {'node-role.kubernetes.io/edge': '', 'usb': 'true'},
        },
        permissions: 'rw',
      }), {allocation: 'Class', capacity: 10, permissions: 'rw'}],
    ]
    for (const [title, body, defaults] of cases) {
      it(title, async () => {
        const local = validateDeviceClass(body)
        if (!local.ok) expect.fail(`validateDeviceClass refused it: ${JSON.stringify(local.issues)}`)

        const stored = await create(body)
        expect(stored.spec).to.deep.include(defaults)
        // No server-side default for capacity (it would break allocation Device); readers use 1.
        if (!('capacity' in defaults)) expect(stored.spec).to.not.have.property('capacity')

        // What the server stores reads back as the same class through the validator.
        const fromServer = validateDeviceClass(stored)
        if (!fromServer.ok) expect.fail(`validateDeviceClass refused the stored object: ${JSON.stringify(fromServer.issues)}`)
        expect(fromServer.deviceClass.spec).to.deep.equal(local.deviceClass.spec)
        expect(fromServer.deviceClass.metadata).to.deep.equal({generation: 1, name: stored.metadata.name, uid: stored.metadata.uid})
      })
    }
  })

  describe('the status subresource', () => {
    const node = (name: string, minor: number): Json => ({
      devices: [{devName: `ttyUSB${minor}`, id: `c188:${minor}`, major: 188, minor}],
      lastUpdateTime: '2025-06-01T12:00:00Z',
      node: name,
      observedGeneration: 1,
    })

    it('PUT .../status writes status.nodes and leaves spec and generation alone', async () => {
      const stored = await create(deviceClass('status'))
      const name = stored.metadata.name
      const update = {...stored, spec: {...stored.spec, permissions: 'r'}, status: {nodes: [node('worker-1', 0)]}}

      const written = await client.request<StoredClass>('PUT', `${classesPath}/${name}/status`, {body: update})

      expect(written.status?.nodes).to.deep.equal([node('worker-1', 0)])
      const live = await client.request<StoredClass>('GET', `${classesPath}/${name}`)
      expect(live.spec.permissions).to.equal('rw')
      expect(live.metadata.generation).to.equal(1)
      expect(live.status?.nodes?.map((n) => n.node)).to.deep.equal(['worker-1'])
    })

    it('a PUT of the main resource does not write status', async () => {
      const stored = await create(deviceClass('status-main'))
      const written = await client.request<StoredClass>('PUT', `${classesPath}/${stored.metadata.name}`, {body: {...stored, status: {nodes: [node('worker-1', 0)]}}})
      expect(written.status).to.equal(undefined)
    })

    it('each node applies its own entry (list-map keyed by node, a field manager per node)', async () => {
      const stored = await create(deviceClass('status-apply'))
      const name = stored.metadata.name
      const apply = (nodeName: string, minor: number): Promise<StoredClass> => client.request<StoredClass>('PATCH', `${classesPath}/${name}/status`, {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name}, status: {nodes: [node(nodeName, minor)]}},
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: `nfdctl-agent-${nodeName}`, force: true},
      })

      await apply('worker-1', 0)
      await apply('worker-2', 1)
      const afterBoth = await apply('worker-1', 3) // worker-1 again, with another device: worker-2's entry stays

      expect(afterBoth.status?.nodes).to.deep.equal([node('worker-1', 3), node('worker-2', 1)])
    })

    it('refuses a status entry without node, or with a lastUpdateTime that is not a date-time', async () => {
      const stored = await create(deviceClass('status-invalid'))
      for (const entry of [{devices: []}, {lastUpdateTime: 'yesterday', node: 'worker-1'}]) {
        try {
          await client.request('PUT', `${classesPath}/${stored.metadata.name}/status`, {body: {...stored, status: {nodes: [entry]}}})
          expect.fail(`status ${JSON.stringify(entry)} was accepted`)
        } catch (error) {
          expect(isStatus(error, 'Invalid'), String(error)).to.equal(true)
        }
      }
    })
  })

  describe('the CRD object', () => {
    it('is cluster-scoped DeviceClass (devices.nfdctl.io/v1alpha1) with the printer columns', async () => {
      const crd = await client.request<{
        spec: {
          group: string
          names: {kind: string; plural: string; singular: string}
          scope: string
          versions: Array<{name: string; served: boolean; storage: boolean; subresources?: Json; additionalPrinterColumns?: Array<{name: string; jsonPath: string; type: string}>}>
        }
      }>('GET', crdPath)

      expect(crd.spec).to.deep.include({group: 'devices.nfdctl.io', scope: 'Cluster'})
      expect(crd.spec.names).to.deep.include({kind: 'DeviceClass', plural: 'deviceclasses', singular: 'deviceclass'})
      const [version] = crd.spec.versions
      expect(crd.spec.versions).to.have.length(1)
      expect(version).to.deep.include({name: 'v1alpha1', served: true, storage: true})
      expect(version.subresources).to.deep.equal({status: {}})
      expect(version.additionalPrinterColumns?.map((c) => [c.name, c.type, c.jsonPath])).to.deep.equal([
        ['Allocation', 'string', '.spec.allocation'],
        ['Permissions', 'string', '.spec.permissions'],
        ['Capacity', 'integer', '.spec.capacity'],
        ['Age', 'date', '.metadata.creationTimestamp'],
      ])
    })

    it('the server renders the columns as kubectl get shows them', async () => {
      const stored = await create(deviceClass('table', {capacity: 4}))
      const table = await client.request<{columnDefinitions: Array<{name: string}>; rows: Array<{cells: unknown[]}>}>('GET', `${classesPath}/${stored.metadata.name}`, {
        accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
      })
      expect(table.columnDefinitions.map((c) => c.name)).to.deep.equal(['Name', 'Allocation', 'Permissions', 'Capacity', 'Age'])
      expect(table.rows[0].cells.slice(0, 4)).to.deep.equal([stored.metadata.name, 'Class', 'rw', 4])
    })
  })
})
