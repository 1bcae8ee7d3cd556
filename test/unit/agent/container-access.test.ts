import {expect} from 'chai'

import {containerRequests, diffAccess, wantedAccess, type DeviceAccess} from '../../../src/lib/agent/container-access.js'
import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {stableDeviceId} from '../../../src/lib/plugins/class-allocation.js'

function loop(minor: number): Device {
  return {devName: `loop${minor}`, devNode: `/dev/loop${minor}`, devPath: `/devices/virtual/block/loop${minor}`, id: `b7:${minor}`, kernelName: `loop${minor}`, major: 7, minor, properties: {}, subsystem: 'block', type: 'block'}
}

function deviceClass(name: string, allocation: 'Class' | 'Device', permissions = 'rw'): DeviceClass {
  return {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name}, spec: {allocation, capacity: 1, match: [], permissions}}
}

describe('containerRequests', function () {
  it('reads limits devices.nfdctl.io/<class> and the annotation devices.nfdctl.io/<container>, per container', function () {
    const requests = containerRequests({
      metadata: {annotations: {'devices.nfdctl.io/app': 'serial, gpio', 'devices.nfdctl.io/nope': 'x', unrelated: 'y'}, name: 'p', namespace: 'ns'},
      spec: {containers: [
        {name: 'app', resources: {limits: {cpu: '1', 'devices.nfdctl.io/gpio': '1', 'devices.nfdctl.io/loop': '2'}}},
        {name: 'sidecar'},
        {name: 'zero', resources: {limits: {'devices.nfdctl.io/loop': '0'}}},
      ]},
    })
    expect(requests).to.have.length(1)
    expect(requests[0]).to.deep.include({container: 'app', namespace: 'ns', pod: 'p'})
    expect([...requests[0].classes]).to.deep.equal([['serial', 'annotation'], ['gpio', 'limit'], ['loop', 'limit']])
  })
})

describe('wantedAccess', function () {
  const classes = new Map([['c', deviceClass('c', 'Class', 'r')], ['d', deviceClass('d', 'Device', 'w')]])
  const members = new Map([['c', [loop(1), loop(2)]], ['d', [loop(2), loop(3), loop(4)]]])

  it('Class allocation: every device present; Device allocation by limit: only what kubelet allocated; a device in two classes gets both permissions', function () {
    const wanted = wantedAccess({
      allocated: new Map([['d', [stableDeviceId(loop(2)), stableDeviceId(loop(4)), 'gone-device-id']]]),
      classes, members,
      request: {classes: new Map([['c', 'limit'], ['d', 'limit']]), container: 'main', namespace: 'default', pod: 'p'},
    })
    expect([...wanted].map(([id, a]) => [id, a.access])).to.deep.equal([['b7:1', 'r'], ['b7:2', 'rw'], ['b7:4', 'w']])
  })

  it('Device allocation by annotation: every device of the class; an unknown class gives nothing', function () {
    const wanted = wantedAccess({allocated: new Map(), classes, members, request: {classes: new Map([['d', 'annotation'], ['zz', 'limit']]), container: 'main', namespace: 'default', pod: 'p'}})
    expect([...wanted.keys()]).to.deep.equal(['b7:2', 'b7:3', 'b7:4'])
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

  it('never revokes what the container\'s runtime spec allowed from the start', function () {
    const {grant, revoke} = diffAccess(new Map([access(5, 'rw')]), new Map(), new Set(['b7:5']))
    expect([grant, revoke]).to.deep.equal([[], []])
  })

  it('changes nothing when the container has what it should', function () {
    const both = new Map([access(1, 'r')])
    expect(diffAccess(both, both)).to.deep.equal({grant: [], revoke: []})
  })
})
