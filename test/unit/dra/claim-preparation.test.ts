import {expect} from 'chai'

import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {claimCdiId} from '../../../src/lib/dra/claim-cdi.js'
import {prepareClaim, type ClaimPreparation, type ResourceClaimObject} from '../../../src/lib/dra/claim-preparation.js'
import type {PreparedClaim} from '../../../src/lib/dra/prepared-claims.js'
import {draDeviceName} from '../../../src/lib/dra/resource-slices.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {extendedResourceClaim} from '../../support/dra-claims.js'

const node = 'worker-1'
const driver = 'devices.nfdctl.io'
const uid = 'c1a1m-0001'

const serialA = loop(1, {ID_SERIAL: 'serial-a', ID_SERIAL_SHORT: 'serial-a'})
const serialB = loop(2, {ID_SERIAL: 'serial-b', ID_SERIAL_SHORT: 'serial-b'})
const disk = loop(3, {ID_SERIAL: 'disk', ID_SERIAL_SHORT: 'disk'})
const shared = loop(4, {ID_SERIAL: 'shared', ID_SERIAL_SHORT: 'shared'})
const upper = loop(5, {ID_SERIAL: 'Upper_Case', ID_SERIAL_SHORT: 'Upper_Case'})
const nameOf = (device: Device): string => draDeviceName(stableDeviceId(device))

const classes = new Map<string, DeviceClass>(
  [
    deviceClass('serial', {allocation: 'DRA', permissions: 'rw'}),
    deviceClass('disks', {allocation: 'DRA', permissions: 'r'}),
    deviceClass('plain', {allocation: 'Class'}),
    deviceClass('units', {allocation: 'Device'}),
  ].map((c) => [c.metadata.name, c]),
)
const members = new Map<string, Device[]>([
  ['serial', [serialA, serialB, upper]],
  ['disks', [disk]],
  ['plain', [shared]],
  ['units', [shared]],
])

type Requests = NonNullable<NonNullable<ResourceClaimObject['spec']>['devices']>['requests']
type Results = NonNullable<NonNullable<NonNullable<NonNullable<ResourceClaimObject['status']>['allocation']>['devices']>['results']>

const exactly = (name: string, deviceClassName: string): NonNullable<Requests>[number] => ({exactly: {deviceClassName}, name})
const result = (request: string, device: string, more: Partial<Results[number]> = {}): Results[number] => ({device, driver, pool: node, request, ...more})

function claim(requests: Requests, results: Results | undefined, more: Partial<ResourceClaimObject> = {}): ResourceClaimObject {
  return {
    metadata: {name: 'serial-claim', namespace: 'lab', uid},
    spec: {devices: {requests}},
    status: results === undefined ? undefined : {allocation: {devices: {results}}, reservedFor: [{name: 'app', resource: 'pods', uid: 'pod-1'}]},
    ...more,
  }
}

function prepare(object: ResourceClaimObject, askedUid = uid): ClaimPreparation {
  return prepareClaim({claim: object, classes, members: (name) => members.get(name) ?? [], nodeName: node, uid: askedUid})
}

function prepared(preparation: ClaimPreparation): {prepared: PreparedClaim; devices: Device[]} {
  if ('error' in preparation) expect.fail(`expected a prepared claim, got the error: ${preparation.error}`)
  return {devices: preparation.devices.map((d) => d.device), prepared: preparation.prepared}
}

function error(preparation: ClaimPreparation): string {
  if (!('error' in preparation)) expect.fail(`expected an error, got a prepared claim: ${JSON.stringify(preparation.prepared)}`)
  return preparation.error
}

describe('prepareClaim', function () {
  it("prepares the allocated device with its class's access, its CDI device and its stable ID", function () {
    const made = prepared(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialB))])))
    expect(made.prepared).to.deep.equal({
      devices: [
        {
          access: 'rw',
          adminAccess: undefined,
          cdiId: claimCdiId(uid, nameOf(serialB)),
          className: 'serial',
          device: nameOf(serialB),
          request: 'port',
          stableId: stableDeviceId(serialB),
          toleratesUnplugged: undefined,
        },
      ],
      name: 'serial-claim',
      namespace: 'lab',
      pods: ['pod-1'],
      uid,
    })
    expect(made.devices).to.deep.equal([serialB])
  })

  it('prepares an unplugged device the pool lists (tainted) when its request tolerates the unplugged taint: recorded, not among the devices present; otherwise the claim waits', function () {
    const gone = loop(9, {ID_SERIAL: 'gone', ID_SERIAL_SHORT: 'gone'})
    const unplugged = (name: string) => (name === nameOf(gone) ? {classes: ['serial'], device: gone} : undefined)
    const tolerating = (tolerations: object[]): NonNullable<Requests>[number] => ({exactly: {allocationMode: 'All', deviceClassName: 'serial.devices.nfdctl.io', tolerations} as never, name: 'all'})
    const allOf = (request: NonNullable<Requests>[number]) =>
      prepareClaim({claim: claim([request], [result('all', nameOf(serialA)), result('all', nameOf(gone))]), classes, members: (name) => members.get(name) ?? [], nodeName: node, uid, unplugged})
    const made = prepared(allOf(tolerating([{effect: 'NoSchedule', key: 'devices.nfdctl.io/unplugged', operator: 'Exists'}])))
    expect(made.devices, 'present now').to.deep.equal([serialA])
    expect(made.prepared.devices.map((d) => [d.device, d.stableId, d.toleratesUnplugged])).to.deep.equal([
      [nameOf(serialA), stableDeviceId(serialA), true],
      [nameOf(gone), stableDeviceId(gone), true],
    ])
    for (const tolerations of [[{operator: 'Exists'}], [{key: 'devices.nfdctl.io/unplugged'}], [{key: 'devices.nfdctl.io/unplugged', operator: 'Exists'}]]) {
      expect(prepared(allOf(tolerating(tolerations))).prepared.devices, JSON.stringify(tolerations)).to.have.length(2)
    }
    for (const tolerations of [
      [],
      [{effect: 'NoExecute', key: 'devices.nfdctl.io/unplugged', operator: 'Exists'}],
      [{key: 'devices.nfdctl.io/unplugged', value: 'x'}],
      [{key: 'example.com/other', operator: 'Exists'}],
    ]) {
      expect(error(allOf(tolerating(tolerations))), JSON.stringify(tolerations)).to.match(/is not present on node worker-1/)
    }
    // Not in the request's class (a device of another class the pool remembers): never prepared.
    const elsewhere = (name: string) => (name === nameOf(gone) ? {classes: ['disks'], device: gone} : undefined)
    const request = tolerating([{operator: 'Exists'}])
    expect(error(prepareClaim({claim: claim([request], [result('all', nameOf(gone))]), classes, members: (name) => members.get(name) ?? [], nodeName: node, uid, unplugged: elsewhere}))).to.match(
      /not present/,
    )
  })

  it('prepares every result of the driver, in order, each with its own class; results of other drivers are not ours', function () {
    const made = prepared(
      prepare(
        claim(
          [exactly('port', 'serial.devices.nfdctl.io'), exactly('store', 'disks.devices.nfdctl.io'), exactly('gpu', 'gpu.example.com')],
          [result('store', nameOf(disk)), result('gpu', 'gpu-0', {driver: 'gpu.example.com', pool: 'elsewhere'}), result('port', nameOf(serialA))],
        ),
      ),
    )
    expect(made.prepared.devices.map((d) => [d.request, d.device, d.className, d.access])).to.deep.equal([
      ['store', nameOf(disk), 'disks', 'r'],
      ['port', nameOf(serialA), 'serial', 'rw'],
    ])
    expect(made.devices).to.deep.equal([disk, serialA])
  })

  it('keeps the pods the claim is reserved for, and only pods with a UID', function () {
    const made = prepared(
      prepare(
        claim([exactly('port', 'serial.devices.nfdctl.io')], undefined, {
          status: {
            allocation: {devices: {results: [result('port', nameOf(serialA))]}},
            reservedFor: [
              {name: 'a', resource: 'pods', uid: 'pod-a'},
              {name: 'job', resource: 'jobs', uid: 'job-1'},
              {name: 'no-uid', resource: 'pods'},
              {name: 'unnamed-resource', uid: 'x'},
              {name: 'b', resource: 'pods', uid: 'pod-b'},
            ],
          },
        }),
      ),
    )
    expect(made.prepared.pods).to.deep.equal(['pod-a', 'pod-b'])
  })

  it('a claim reserved for nobody yet is prepared for no pod; a claim without a namespace gets an empty one', function () {
    const made = prepared(
      prepare(
        claim([exactly('port', 'serial.devices.nfdctl.io')], undefined, {
          metadata: {name: 'c', uid},
          status: {allocation: {devices: {results: [result('port', nameOf(serialA))]}}},
        }),
      ),
    )
    expect([made.prepared.pods, made.prepared.namespace]).to.deep.equal([[], ''])
  })

  it('carries adminAccess when the result has it, and only then', function () {
    const admin = prepared(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialA), {adminAccess: true})])))
    expect(admin.prepared.devices[0].adminAccess).to.equal(true)
    const notAdmin = prepared(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialA), {adminAccess: false})])))
    expect(notAdmin.prepared.devices[0].adminAccess).to.equal(undefined)
  })

  it('firstAvailable: a result of req/sub takes the class of that subrequest', function () {
    const requests: Requests = [
      {
        firstAvailable: [
          {deviceClassName: 'disks.devices.nfdctl.io', name: 'big'},
          {deviceClassName: 'serial.devices.nfdctl.io', name: 'small'},
        ],
        name: 'any',
      },
    ]
    const made = prepared(prepare(claim(requests, [result('any/small', nameOf(serialA))])))
    expect(made.prepared.devices.map((d) => [d.request, d.className, d.access])).to.deep.equal([['any/small', 'serial', 'rw']])
    // The same device through the other subrequest is not a device of that subrequest's class.
    expect(error(prepare(claim(requests, [result('any/big', nameOf(serialA))])))).to.include(`device ${nameOf(serialA)} of ResourceClaim lab/serial-claim is not present`)
    expect(error(prepare(claim(requests, [result('any/none', nameOf(serialA))])))).to.include('names DeviceClass (none)')
    expect(error(prepare(claim(requests, [result('any', nameOf(serialA))])))).to.include('names DeviceClass (none)')
  })

  it("the claim kube-scheduler makes for a pod's limit devices.nfdctl.io/<class> is prepared like any claim, and checked like one", function () {
    const made = prepared(prepare(extendedResourceClaim(uid, 'web-0', [serialA, upper], 'serial', node)))
    expect(made.prepared.devices.map((d) => [d.request, d.device, d.className])).to.deep.equal([
      ['container-0-request-0', nameOf(serialA), 'serial'],
      ['container-0-request-0', nameOf(upper), 'serial'],
    ])
    expect(made.prepared).to.deep.include({name: 'web-0-extended-resources-x7k2p', pods: [`pod-${uid}`]})
    // Another node's pool, a device outside the class, a stale UID: refused as for a claim a user wrote.
    expect(error(prepare(extendedResourceClaim(uid, 'web-0', [serialA], 'serial', 'worker-2')))).to.contain("which is not this node's (worker-1)")
    expect(error(prepare(extendedResourceClaim(uid, 'web-0', [disk], 'serial', node)))).to.contain('not present on node worker-1')
    expect(error(prepare(extendedResourceClaim(uid, 'web-0', [serialA], 'serial', node), 'other-uid'))).to.contain('deleted and created again')
  })

  it('refuses a claim of another UID: the claim kubelet asked for was deleted and created again', function () {
    const message = error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialA))]), 'older-uid'))
    expect(message).to.include(`has UID ${uid}, not older-uid`)
  })

  it('refuses a claim not allocated yet, or with no device of this driver', function () {
    expect(error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], undefined)))).to.equal('ResourceClaim lab/serial-claim is not allocated yet')
    expect(error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], undefined, {status: {reservedFor: []}})))).to.include('is not allocated yet')
    expect(error(prepare(claim([exactly('gpu', 'gpu.example.com')], [result('gpu', 'gpu-0', {driver: 'gpu.example.com'})])))).to.equal(
      'ResourceClaim lab/serial-claim has no device of driver devices.nfdctl.io allocated',
    )
    expect(error(prepare(claim([], [])))).to.include('has no device of driver devices.nfdctl.io allocated')
  })

  it("refuses a device of another node's pool", function () {
    const message = error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialA), {pool: 'worker-2'})])))
    expect(message).to.include(`device ${nameOf(serialA)} of pool worker-2, which is not this node's (worker-1)`)
  })

  it("refuses a request naming a class that is not one of this node's DRA classes", function () {
    for (const [className, device] of [
      ['plain.devices.nfdctl.io', shared],
      ['units.devices.nfdctl.io', shared],
      ['nope.devices.nfdctl.io', serialA],
      ['serial.example.com', serialA],
      ['serial', serialA],
    ] as const) {
      const message = error(prepare(claim([exactly('port', className)], [result('port', nameOf(device))])))
      expect(message, className).to.include(`names DeviceClass ${className}, which is not a DRA class of devices.nfdctl.io on node worker-1`)
    }
    expect(error(prepare(claim([exactly('other', 'serial.devices.nfdctl.io')], [result('port', nameOf(serialA))])))).to.include('names DeviceClass (none)')
    expect(error(prepare(claim(undefined, [result('port', nameOf(serialA))])))).to.include('names DeviceClass (none)')
  })

  it('refuses a device that is not present, or present but not in the class the request named', function () {
    const gone = loop(9, {ID_SERIAL: 'gone', ID_SERIAL_SHORT: 'gone'})
    expect(error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(gone))])))).to.equal(
      `device ${nameOf(gone)} of ResourceClaim lab/serial-claim is not present on node worker-1 (unplugged, or no longer in class serial)`,
    )
    // The disk is on the node, in another DRA class: a name in the claim hands out nothing outside the class.
    expect(error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(disk))])))).to.include(`device ${nameOf(disk)} of ResourceClaim lab/serial-claim is not present`)
    // A stable ID is not a device name (where the two differ).
    expect(stableDeviceId(upper)).to.not.equal(nameOf(upper))
    expect(error(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', stableDeviceId(upper))])))).to.include('is not present')
    expect(prepared(prepare(claim([exactly('port', 'serial.devices.nfdctl.io')], [result('port', nameOf(upper))]))).prepared.devices[0].stableId).to.equal(stableDeviceId(upper))
  })

  it('one bad result fails the whole claim: nothing of it is prepared', function () {
    const preparation = prepare(claim([exactly('port', 'serial.devices.nfdctl.io'), exactly('store', 'disks.devices.nfdctl.io')], [result('port', nameOf(serialA)), result('store', nameOf(serialB))]))
    expect(preparation).to.have.keys(['error'])
  })
})
