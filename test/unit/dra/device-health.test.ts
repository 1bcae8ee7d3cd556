import {expect} from 'chai'

import type {Device} from '../../../src/lib/devices/types.js'
import {claimDeviceStatuses, devicesHealth, type DeviceCondition} from '../../../src/lib/dra/device-health.js'
import type {PreparedClaim, PreparedDevice} from '../../../src/lib/dra/prepared-claims.js'
import {loopDevice as loop} from '../../support/loop-device.js'

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

  it('a claim without devices has no entries', function () {
    expect(claimDeviceStatuses(claim('u9'), 'worker-1', present, '2026-12-05T10:00:00Z')).to.deep.equal([])
  })
})
