import {expect} from 'chai'

import {containerRequests, criLabels, diffAccess, requestOfContainer, wantedAccess, type ContainerRequest, type DeviceAccess, type RequestedVia} from '../../../src/lib/agent/container-access.js'
import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

describe('containerRequests', function () {
  it('reads limits devices.nfdctl.io/<class> and the annotation devices.nfdctl.io/<container>, per container', function () {
    const requests = containerRequests({
      metadata: {
        annotations: {'devices.nfdctl.io/app': 'serial, gpio', 'devices.nfdctl.io/nope': 'x', unrelated: 'y'},
        creationTimestamp: '2026-12-05T10:00:00Z',
        name: 'p',
        namespace: 'ns',
        uid: 'u1',
      },
      spec: {
        containers: [
          {name: 'app', resources: {limits: {cpu: '1', 'devices.nfdctl.io/gpio': '1', 'devices.nfdctl.io/loop': '2'}}},
          {name: 'sidecar'},
          {name: 'zero', resources: {limits: {'devices.nfdctl.io/loop': '0'}}},
        ],
      },
    })
    expect(requests).to.have.length(1)
    expect(requests[0]).to.deep.include({container: 'app', createdAt: '2026-12-05T10:00:00Z', namespace: 'ns', pod: 'p', podUid: 'u1'})
    expect([...requests[0].classes]).to.deep.equal([
      ['serial', 'annotation'],
      ['gpio', 'limit'],
      ['loop', 'limit'],
    ])
  })
})

describe('containerRequests: the annotation is hostile input', function () {
  const annotated = (value: string): ReturnType<typeof containerRequests> =>
    containerRequests({
      metadata: {annotations: {'devices.nfdctl.io/main': value}, name: 'p', namespace: 'ns', uid: 'u'},
      spec: {containers: [{name: 'main'}]},
    })

  it('trims only blanks and tabs, and drops names no class can have, saying so', function () {
    const [r] = annotated(' serial,\tgpio ,usb.serial-0,\uFEFFserial,Serial,a/b,,x'.concat('y'.repeat(70)))
    expect([...r.classes.keys()]).to.deep.equal(['serial', 'gpio', 'usb.serial-0'])
    expect(r.annotationProblem).to.equal('the annotation devices.nfdctl.io/main has 4 name(s) that no DeviceClass can have (such as "\uFEFFserial"); list DeviceClass names, comma-separated')
  })

  it('a container whose annotation holds only bad names is still a request (it is told why)', function () {
    const [r] = annotated('BAD')
    expect(r.classes.size).to.equal(0)
    expect(r.annotationProblem).to.match(/1 name\(s\) that no DeviceClass can have/)
  })
})

describe('wantedAccess', function () {
  const classes = new Map([
    ['c', deviceClass('c', {permissions: 'r'})],
    ['d', deviceClass('d', {allocation: 'Device', permissions: 'w'})],
  ])
  const members = new Map([
    ['c', [loop(1), loop(2)]],
    ['d', [loop(2), loop(3), loop(4)]],
  ])

  it('Class allocation: every device present; Device allocation by limit: only what kubelet allocated; a device in two classes gets both permissions', function () {
    const wanted = wantedAccess({
      allocated: new Map([['d', [stableDeviceId(loop(2)), stableDeviceId(loop(4)), 'gone-device-id']]]),
      classes,
      members,
      request: {
        classes: new Map([
          ['c', 'limit'],
          ['d', 'limit'],
        ]),
        container: 'main',
        namespace: 'default',
        pod: 'p',
        podUid: 'u',
      },
    })
    expect([...wanted].map(([id, a]) => [id, a.access])).to.deep.equal([
      ['b7:1', 'r'],
      ['b7:2', 'rw'],
      ['b7:4', 'w'],
    ])
  })

  it("Device allocation by annotation: nothing, not even devices no one holds (they are kubelet's to give); an unknown class gives nothing", function () {
    const wanted = wantedAccess({
      allocated: new Map([['d', [stableDeviceId(loop(2))]]]),
      classes,
      members,
      request: {
        classes: new Map([
          ['d', 'annotation'],
          ['zz', 'limit'],
        ]),
        container: 'main',
        namespace: 'default',
        pod: 'p',
        podUid: 'u',
      },
    })
    expect([...wanted.keys()]).to.deep.equal([])
  })
})

describe('wantedAccess: allocation DRA', function () {
  const classes = new Map([
    ['claimed', deviceClass('claimed', {allocation: 'DRA', permissions: 'rw'})],
    ['shared', deviceClass('shared', {permissions: 'r'})],
    ['units', deviceClass('units', {allocation: 'Device', permissions: 'w'})],
  ])
  const members = new Map([
    ['claimed', [loop(1), loop(2), loop(3)]],
    ['shared', [loop(3), loop(4)]],
    ['units', [loop(5)]],
  ])
  const allocated = new Map([
    ['claimed', [stableDeviceId(loop(2)), stableDeviceId(loop(3)), 'unplugged-device-id']],
    ['shared', [stableDeviceId(loop(4))]],
    ['units', [stableDeviceId(loop(5))]],
  ])
  const asking = (classes: Array<[string, RequestedVia]>): ContainerRequest => ({classes: new Map(classes), container: 'main', namespace: 'default', pod: 'p', podUid: 'u'})
  const wanted = (classesAsked: Array<[string, RequestedVia]>, given = allocated): Array<[string, string]> =>
    [...wantedAccess({allocated: given, classes, members, request: asking(classesAsked)})].map(([id, a]) => [id, a.access])

  it("by claim: only the devices of the container's claims (by stable ID) that are present", function () {
    expect(wanted([['claimed', 'claim']])).to.deep.equal([
      ['b7:2', 'rw'],
      ['b7:3', 'rw'],
    ])
    expect(wanted([['claimed', 'claim']], new Map())).to.deep.equal([])
    expect(wanted([['claimed', 'claim']], new Map([['shared', [stableDeviceId(loop(1))]]]))).to.deep.equal([])
  })

  it('a claimed device plugged in again under another kernel name is given again (the stable ID follows it)', function () {
    const replugged = {...loop(2), devName: 'loop8', devNode: '/dev/loop8', id: 'b7:8', kernelName: 'loop8', minor: 8}
    const moved = wantedAccess({allocated, classes, members: new Map([['claimed', [replugged]]]), request: asking([['claimed', 'claim']])})
    expect([...moved.keys()]).to.deep.equal(['b7:8'])
  })

  it('by limit or annotation: nothing of a DRA class, even devices allocated to the container', function () {
    expect(wanted([['claimed', 'limit']])).to.deep.equal([])
    expect(wanted([['claimed', 'annotation']])).to.deep.equal([])
  })

  it('a claim on a Class- or Device-allocation class gives nothing, allocation or not', function () {
    expect(wanted([['shared', 'claim']])).to.deep.equal([])
    expect(wanted([['units', 'claim']])).to.deep.equal([])
    expect(wanted([['nope', 'claim']])).to.deep.equal([])
  })

  it('a claimed device also in a class held by annotation gets both permissions', function () {
    expect(
      wanted([
        ['claimed', 'claim'],
        ['shared', 'annotation'],
      ]),
    ).to.deep.equal([
      ['b7:2', 'rw'],
      ['b7:3', 'rw'],
      ['b7:4', 'r'],
    ])
  })
})

describe('requestOfContainer', function () {
  const request: ContainerRequest = {classes: new Map([['c', 'limit']]), container: 'main', namespace: 'ns', pod: 'web-0', podUid: 'new-uid'}
  const requests = new Map([['new-uid/main', request]])
  const labels = (uid: string | undefined): Record<string, string> => ({
    [criLabels.container]: 'main',
    [criLabels.namespace]: 'ns',
    [criLabels.pod]: 'web-0',
    ...(uid === undefined ? {} : {[criLabels.podUid]: uid}),
  })

  it('finds the request by pod UID and container name', function () {
    expect(requestOfContainer(labels('new-uid'), requests)).to.equal(request)
  })

  it('a container of an earlier pod with the same namespace and name (re-created) matches nothing; nor one without a UID label', function () {
    expect(requestOfContainer(labels('old-uid'), requests)).to.equal(undefined)
    expect(requestOfContainer(labels(undefined), requests)).to.equal(undefined)
  })
})

describe('diffAccess', function () {
  const access = (minor: number, rights: string): [string, DeviceAccess] => [`b7:${minor}`, {access: rights, device: loop(minor)}]

  it('grants what is missing, revokes what is no longer wanted, and re-grants a changed permission', function () {
    const current = new Map([access(1, 'rw'), access(2, 'rw'), access(3, 'r')])
    const wanted = new Map([access(1, 'rw'), access(3, 'rw'), access(4, 'r')])
    const {grant, revoke} = diffAccess(current, wanted)
    expect(revoke.map((a) => `${a.device.id} ${a.access}`)).to.deep.equal(['b7:2 rw', 'b7:3 r'])
    expect(grant.map((a) => `${a.device.id} ${a.access}`)).to.deep.equal(['b7:3 rw', 'b7:4 r'])
  })

  it("never revokes what the container's runtime spec allowed from the start", function () {
    const {grant, revoke} = diffAccess(new Map([access(5, 'rw')]), new Map(), new Set(['b7:5']))
    expect([grant, revoke]).to.deep.equal([[], []])
  })

  it('changes nothing when the container has what it should', function () {
    const both = new Map([access(1, 'r')])
    expect(diffAccess(both, both)).to.deep.equal({grant: [], revoke: []})
  })

  it("a device whose controls disagree (a hybrid host's program allows it, the v1 rule not yet) is written again when wanted, revoked when not", function () {
    const held = new Map([access(1, 'rw'), access(2, 'rw')])
    const {grant, revoke} = diffAccess(held, new Map([access(1, 'rw')]), new Set(), new Set(['b7:1', 'b7:2']))
    expect(revoke.map((a) => `${a.device.id} ${a.access}`)).to.deep.equal(['b7:1 rw', 'b7:2 rw'])
    expect(grant.map((a) => `${a.device.id} ${a.access}`)).to.deep.equal(['b7:1 rw'])
    // The runtime's own device: never touched, whatever its controls say.
    expect(diffAccess(held, new Map([access(1, 'rw')]), new Set(['b7:1']), new Set(['b7:1']))).to.deep.equal({grant: [], revoke: [held.get('b7:2')]})
  })
})
