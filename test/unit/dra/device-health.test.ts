import {expect} from 'chai'

import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {claimDeviceStatuses, claimedOutsideClass, devicesHealth, type DeviceCondition} from '../../../src/lib/dra/device-health.js'
import type {PreparedClaim, PreparedDevice} from '../../../src/lib/dra/prepared-claims.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'

const device = (name: string, stableId = `${name}-id`): PreparedDevice => ({
  access: 'rw',
  cdiId: `dra.devices.nfdctl.io/claim=u-${name}`,
  className: 'disks',
  device: name,
  request: 'req',
  stableId,
})
const claim = (uid: string, ...devices: PreparedDevice[]): PreparedClaim => ({devices, name: `claim-${uid}`, namespace: 'lab', pods: ['pod-1'], uid})

describe('devicesHealth', function () {
  it('every device of the pool is healthy, with where it is', function () {
    const present = new Map<string, Device>([['disk-b', loop(2)]])
    expect(devicesHealth(present, [])).to.deep.equal([{device: 'disk-b', healthy: true, message: 'present as /dev/loop2'}])
  })

  it("a prepared claim's device that is not present is unhealthy (once, however many claims hold it); the list is in name order", function () {
    const present = new Map<string, Device>([
      ['zz-disk', loop(9)],
      ['disk-a', loop(1)],
    ])
    const claims = [claim('u1', device('disk-a'), device('gone-disk', 'Gone_Disk-0123')), claim('u2', device('gone-disk', 'Gone_Disk-0123')), claim('u3', device('another-gone'))]
    const health = devicesHealth(present, claims)
    expect(health.map((h) => [h.device, h.healthy])).to.deep.equal([
      ['another-gone', false],
      ['disk-a', true],
      ['gone-disk', false],
      ['zz-disk', true],
    ])
    expect(health[2].message).to.equal('unplugged: device gone-disk (Gone_Disk-0123) is not present on the node')
    expect(health[1].message).to.equal('present as /dev/loop1')
  })

  it('a device taken out of its class while on the node is unhealthy as not in class, not as unplugged', function () {
    const health = devicesHealth(new Map(), [claim('u1', device('disk-a', 'Disk_A-1'), device('disk-b', 'Disk_B-2'))], new Set(['disk-a']))
    expect(health).to.deep.equal([
      {device: 'disk-a', healthy: false, message: 'not in class: device disk-a (Disk_A-1) is on the node but DeviceClass (devices.nfdctl.io) disks no longer serves it'},
      {device: 'disk-b', healthy: false, message: 'unplugged: device disk-b (Disk_B-2) is not present on the node'},
    ])
  })

  it('nothing present and nothing prepared: nothing to tell', function () {
    expect(devicesHealth(new Map(), [])).to.deep.equal([])
  })
})

describe('claimDeviceStatuses', function () {
  const prepared = claim('u1', device('disk-a'), device('disk-b', 'Disk_B-42'))
  const present = new Map<string, Device>([['disk-a', {...loop(1), devName: 'loop1', devNode: '/dev/loop1'}]])
  const condition = (status: 'True' | 'False', lastTransitionTime: string): DeviceCondition => ({
    lastTransitionTime,
    message: 'before',
    reason: status === 'True' ? 'DevicePresent' : 'DeviceUnplugged',
    status,
    type: 'Ready',
  })

  it('a present device is Ready with where it is; an absent one is not Ready, unplugged, without data', function () {
    const statuses = claimDeviceStatuses(prepared, 'worker-1', present, '2026-12-05T10:00:00Z')
    expect(statuses).to.deep.equal([
      {
        conditions: [{lastTransitionTime: '2026-12-05T10:00:00Z', message: 'present as /dev/loop1', reason: 'DevicePresent', status: 'True', type: 'Ready'}],
        data: {devNode: '/dev/loop1', kernelName: 'loop1'},
        device: 'disk-a',
        driver: 'devices.nfdctl.io',
        pool: 'worker-1',
      },
      {
        conditions: [
          {
            lastTransitionTime: '2026-12-05T10:00:00Z',
            message: 'device Disk_B-42 was unplugged; the containers of the claim get it back when it is plugged in again',
            reason: 'DeviceUnplugged',
            status: 'False',
            type: 'Ready',
          },
        ],
        data: undefined,
        device: 'disk-b',
        driver: 'devices.nfdctl.io',
        pool: 'worker-1',
      },
    ])
  })

  it('keeps the transition time while the status holds, and takes now when it flips', function () {
    const now = '2026-12-05T11:00:00Z'
    const previous = new Map([
      ['disk-a', condition('True', '2026-12-05T09:00:00Z')],
      ['disk-b', condition('True', '2026-12-05T09:30:00Z')],
    ])
    const statuses = claimDeviceStatuses(prepared, 'worker-1', present, now, previous)
    expect(statuses.map((s) => [s.device, s.conditions[0].status, s.conditions[0].lastTransitionTime])).to.deep.equal([
      ['disk-a', 'True', '2026-12-05T09:00:00Z'],
      ['disk-b', 'False', now],
    ])

    // disk-b stays unplugged: its time stays; disk-a goes and comes back later: each flip takes its own now.
    const later = '2026-12-05T12:00:00Z'
    const again = new Map(statuses.map((s) => [s.device, s.conditions[0]]))
    const unplugged = claimDeviceStatuses(prepared, 'worker-1', new Map(), later, again)
    expect(unplugged.map((s) => [s.device, s.conditions[0].status, s.conditions[0].lastTransitionTime])).to.deep.equal([
      ['disk-a', 'False', later],
      ['disk-b', 'False', now],
    ])
    const back = claimDeviceStatuses(prepared, 'worker-1', new Map([['disk-b', loop(7)]]), '2026-12-05T13:00:00Z', new Map(unplugged.map((s) => [s.device, s.conditions[0]])))
    expect(back.map((s) => [s.device, s.conditions[0].status, s.conditions[0].lastTransitionTime, s.data?.devNode])).to.deep.equal([
      ['disk-a', 'False', later, undefined],
      ['disk-b', 'True', '2026-12-05T13:00:00Z', '/dev/loop7'],
    ])
  })

  it('a device out of its class is not Ready with reason DeviceNotInClass, and Ready again once back in the pool', function () {
    const outside = claimDeviceStatuses(prepared, 'worker-1', present, '2026-12-05T10:00:00Z', new Map([['disk-b', condition('True', '2026-12-05T09:00:00Z')]]), new Set(['disk-b']))
    expect(outside[1].conditions).to.deep.equal([
      {
        lastTransitionTime: '2026-12-05T10:00:00Z',
        message:
          "device Disk_B-42 is on the node but DeviceClass (devices.nfdctl.io) disks no longer serves it (edited, deleted, or the device refused: see the class's status); the containers of the claim get it back when the class serves it again",
        reason: 'DeviceNotInClass',
        status: 'False',
        type: 'Ready',
      },
    ])
    expect(outside[1].data).to.equal(undefined)
    expect(outside[0].conditions[0].reason).to.equal('DevicePresent')
    const back = claimDeviceStatuses(prepared, 'worker-1', new Map([['disk-b', loop(7)]]), '2026-12-05T11:00:00Z', new Map(outside.map((s) => [s.device, s.conditions[0]])), new Set())
    expect([back[1].conditions[0].reason, back[1].conditions[0].lastTransitionTime]).to.deep.equal(['DevicePresent', '2026-12-05T11:00:00Z'])
  })

  it('a claim without devices has no entries', function () {
    expect(claimDeviceStatuses(claim('u9'), 'worker-1', present, '2026-12-05T10:00:00Z')).to.deep.equal([])
  })
})

describe('claimedOutsideClass', function () {
  const serial = loop(3, {ID_SERIAL: 'Disk_3', ID_SERIAL_SHORT: 'S3'})
  const ported = loop(4, {ID_PATH: 'pci-0000:00:1d.0-usb-0:1:1.0'})
  const held = (name: string, d: Device, follows: 'Serial' | 'Port' = 'Serial'): PreparedDevice => device(name, stableDeviceId(d, follows))

  it('a claimed device on the node but not in the pool is out of its class; one not on the node is unplugged; one in the pool is neither', function () {
    const claims = [claim('u1', held('disk-3', serial), held('disk-4', ported, 'Port'), held('disk-5', loop(5, {ID_SERIAL_SHORT: 'S5'})))]
    const pool = new Map<string, Device>()
    // disk-4 followed its port: matched by that identity, whatever the class followed.
    expect([...claimedOutsideClass(claims, pool, [serial, ported, loop(9)])].sort()).to.deep.equal(['disk-3', 'disk-4'])
    expect([...claimedOutsideClass(claims, new Map([['disk-3', serial]]), [serial, ported])]).to.deep.equal(['disk-4'])
    expect([...claimedOutsideClass(claims, pool, [])]).to.deep.equal([])
  })

  it('another device under the same kernel name is not the claimed one', function () {
    const claims = [claim('u1', held('disk-3', serial))]
    expect([...claimedOutsideClass(claims, new Map(), [loop(3, {ID_SERIAL: 'Other', ID_SERIAL_SHORT: 'O1'})])]).to.deep.equal([])
  })
})
