import {expect} from 'chai'

import {validateDeviceClass} from '../../src/lib/devices/validate-device-class.js'
import {isStatus, KubeApiError} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {badClasses, caseName, goodClasses, type Json} from '../fixtures/classes/cases.js'
import {adminClient} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {rejection} from '../support/thrown.js'

// The CRD (deploy/crds/deviceclasses.devices.nfdctl.io.yaml) and validateDeviceClass come from one schema
// (src/lib/devices/device-class-schema.ts) and must agree on every case of the shared fixture: what the API
// server refuses the validator refuses, and what it stores (with its defaults) the validator accepts as the
// same class. The cases only nfdctl refuses say why.

const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deviceclasses.devices.nfdctl.io'
const prefix = 'crd-test-' // other suites may own DeviceClasses on the shared control plane: touch only ours
const strict = {fieldValidation: 'Strict'}

interface StoredClass {
  metadata: {name: string; generation: number; resourceVersion: string; uid: string}
  spec: Json
  status?: {nodes?: Array<{node: string; devices?: Json[]}>}
}

/** A class of ours on the shared control plane. */
const deviceClass = (name: string, spec: Json = {}): Json => deviceClassManifest(`${prefix}${name}`, spec)

/** The fixture's class under a name of its own (cases about the name keep theirs, all starting crd-test-). */
function named(value: unknown, name: string): Json {
  const object = value as Json
  const metadata = object.metadata as Json | undefined
  return metadata?.name === caseName ? {...object, metadata: {...metadata, name: `${prefix}${name}`}} : object
}

describe('DeviceClass (devices.nfdctl.io) CRD against a real kube-apiserver', function () {
  let client: KubeClient
  const created = new Set<string>()

  async function create(body: Json, query?: Record<string, string>): Promise<StoredClass> {
    const stored = await client.request<StoredClass>('POST', classesPath, {body, query})
    created.add(stored.metadata.name)
    return stored
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

  describe('the shared fixture: both accept, and the server stores what the validator reads', () => {
    goodClasses.forEach(({title, value}, i) => {
      it(title, async () => {
        const body = named(value, `good-${i}`)
        const local = validateDeviceClass(body)
        if (!local.ok) expect.fail(`validateDeviceClass refused it: ${JSON.stringify(local.issues)}`)

        const stored = await create(body, strict)
        // No server-side default for capacity (it would break allocation Device); readers use 1.
        if ((body.spec as Json).capacity == null) expect(stored.spec).to.not.have.property('capacity')

        // What the server stores, with its defaults, reads back as the same class through the validator.
        const fromServer = validateDeviceClass(stored)
        if (!fromServer.ok) expect.fail(`validateDeviceClass refused the stored object: ${JSON.stringify(fromServer.issues)}`)
        expect(fromServer.deviceClass.spec).to.deep.equal(local.deviceClass.spec)
        expect(fromServer.deviceClass.metadata).to.deep.equal({generation: 1, name: stored.metadata.name, uid: stored.metadata.uid})
      })
    })
  })

  describe('the shared fixture: the validator refuses, and so does the server unless the case says why not', () => {
    badClasses.forEach(({refused, server, title, value}, i) => {
      it(`${title}: ${refused.path || '(the document)'}`, async function () {
        const local = validateDeviceClass(value)
        expect(local.ok ? [] : local.issues.map((issue) => issue.path), 'validateDeviceClass').to.include(refused.path)

        if ('notSent' in server) return
        const body = named(value, `bad-${i}`)
        if ('accepts' in server) {
          // Known, and named: a rule only nfdctl checks.
          await create(body, strict)
          return
        }
        const error = await rejection(create(body, strict), KubeApiError)
        expect(error.code, `${error.code} ${error.serverMessage}`).to.be.oneOf([400, 422])
        expect(error.serverMessage, error.serverMessage).to.contain(server.refuses)
      })
    })
  })

  it('without fieldValidation=Strict the server prunes unknown fields that the validator reports', async () => {
    const body = deviceClass('unknown-fields', {extra: 1, match: [{subsystem: 'tty', vendor: '0403'}]})
    const result = validateDeviceClass(body)
    expect(result.ok ? [] : result.issues.map((i) => i.path)).to.deep.equal(['spec.extra', 'spec.match[0].vendor'])

    // The API default is Warn: the schema's pruning drops them, and the stored object is clean.
    const stored = await create(body)
    expect(stored.spec).to.deep.equal({allocation: 'Class', match: [{subsystem: 'tty'}], permissions: 'rw'})
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
      const apply = (nodeName: string, minor: number): Promise<StoredClass> =>
        client.request<StoredClass>('PATCH', `${classesPath}/${name}/status`, {
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
