import {expect} from 'chai'

import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {nodeDevicesOf, type NodeDevices} from '../../../src/lib/dra/resource-slices.js'
import {goneDevicesOf, poolDevicesOf, unpluggedPolicyOf, unpluggedTaintKey, unpluggedTaintOf, type GoneDevice} from '../../../src/lib/dra/unplugged-devices.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {draNameOf} from '../../support/dra-claims.js'

const a = loopDevice(1, {ID_SERIAL_SHORT: 'serial-a'})
const b = loopDevice(2, {ID_SERIAL_SHORT: 'serial-b'})
const c = loopDevice(3, {ID_SERIAL_SHORT: 'serial-c'})
const disks = deviceClass('disks', {allocation: 'DRA'})
const t0 = Date.parse('2026-12-06T21:00:00.400Z')

/** The pool of these DRA classes when the class `disks` has these devices (and `more` has `others`). */
function poolOf(devices: Device[], classes: DeviceClass[] = [disks], others: Device[] = []): NodeDevices {
  return nodeDevicesOf(classes, (name) => (name === 'disks' ? devices : others))
}

/** The gone devices after the pool goes from `before` to `after` at `now`, with only `onNode` still on the node. */
function gone(before: NodeDevices, after: NodeDevices, options: {previous?: Map<string, GoneDevice>; onNode?: Device[]; now?: number; classes?: string[]; keep?: number} = {}) {
  const onNode = new Set((options.onNode ?? []).map((d) => d.id))
  return goneDevicesOf({
    after,
    before,
    draClasses: new Set(options.classes ?? ['disks']),
    keep: options.keep,
    now: options.now ?? t0,
    onNode: (d) => onNode.has(d.id),
    previous: options.previous ?? new Map(),
  })
}

describe('unpluggedPolicyOf', function () {
  it('absent or NoSchedule: never NoExecute; NoExecute: after noExecuteAfter, at once without it', function () {
    expect(unpluggedPolicyOf(disks)).to.deep.equal({})
    expect(unpluggedPolicyOf(deviceClass('x', {allocation: 'DRA', unplugged: {effect: 'NoSchedule'}}))).to.deep.equal({})
    expect(unpluggedPolicyOf(deviceClass('x', {allocation: 'DRA', unplugged: {effect: 'NoExecute'}}))).to.deep.equal({noExecuteAfterMs: 0})
    expect(unpluggedPolicyOf(deviceClass('x', {allocation: 'DRA', unplugged: {effect: 'NoExecute', noExecuteAfter: '1h30m5s'}}))).to.deep.equal({noExecuteAfterMs: 5_405_000})
    expect(unpluggedPolicyOf(deviceClass('x', {allocation: 'DRA', unplugged: {effect: 'NoExecute', noExecuteAfter: '90s'}}))).to.deep.equal({noExecuteAfterMs: 90_000})
  })
})

describe('goneDevicesOf', function () {
  it('a device that left the pool and the node is gone since now, as last seen, with its classes', function () {
    const result = gone(poolOf([a, b]), poolOf([b]))
    expect([...result.keys()]).to.deep.equal([draNameOf(a)])
    expect(result.get(draNameOf(a))).to.deep.include({classes: ['disks'], device: a, goneAt: t0})
  })

  it('a device that left the pool but is still on the node (a class edit, two allocators) is not gone', function () {
    expect([...gone(poolOf([a, b]), poolOf([b]), {onNode: [a, b]}).keys()]).to.deep.equal([])
  })

  it('back in the pool (the same stable ID under another kernel name): forgotten', function () {
    const first = gone(poolOf([a]), poolOf([]))
    const again = {...a, devName: 'loop9', devNode: '/dev/loop9', id: 'b7:9', kernelName: 'loop9', minor: 9}
    expect([...gone(poolOf([]), poolOf([again]), {previous: first}).keys()]).to.deep.equal([])
  })

  it('stays gone, with the time it went, while other devices come and go', function () {
    const first = gone(poolOf([a, b]), poolOf([b]))
    const later = gone(poolOf([b]), poolOf([b, c]), {now: t0 + 60_000, previous: first})
    expect([...later].map(([name, g]) => [name, g.goneAt])).to.deep.equal([[draNameOf(a), t0]])
  })

  it('a class no longer DRA (or deleted) takes its gone devices with it; one in another DRA class keeps that class', function () {
    const both = [disks, deviceClass('more', {allocation: 'DRA'})]
    const first = gone(poolOf([a, b], both, [b]), poolOf([], both), {classes: ['disks', 'more']})
    expect([...first.values()].map((g) => [g.device.id, g.classes])).to.deep.equal([
      [a.id, ['disks']],
      [b.id, ['disks', 'more']],
    ])
    const later = gone(poolOf([], both), poolOf([], both), {classes: ['more'], previous: first})
    expect([...later.values()].map((g) => [g.device.id, g.classes])).to.deep.equal([[b.id, ['more']]])
  })

  it('keeps the most recently gone, at most `keep`', function () {
    let previous = new Map<string, GoneDevice>()
    const devices = Array.from({length: 5}, (_, i) => loopDevice(10 + i, {ID_SERIAL_SHORT: `s${i}`}))
    for (const [i, device] of devices.entries()) previous = gone(poolOf([device]), poolOf([]), {keep: 3, now: t0 + i, previous})
    expect([...previous.values()].map((g) => g.device.id)).to.deep.equal(['b7:14', 'b7:13', 'b7:12'])
  })
})

describe('unpluggedTaintOf', function () {
  it('NoSchedule since the unplug, in whole seconds as the API server writes metav1.Time', function () {
    expect(unpluggedTaintOf(t0, [{}], t0 + 5000)).to.deep.equal({changesAt: undefined, taint: {effect: 'NoSchedule', key: 'devices.nfdctl.io/unplugged', timeAdded: '2026-12-06T21:00:00Z'}})
  })

  it('NoExecute once the shortest noExecuteAfter of its classes has passed, timeAdded then; NoSchedule until, with the time it changes', function () {
    const policies = [{}, {noExecuteAfterMs: 300_000}, {noExecuteAfterMs: 30_000}]
    expect(unpluggedTaintOf(t0, policies, t0 + 29_999)).to.deep.equal({changesAt: t0 + 30_000, taint: {effect: 'NoSchedule', key: unpluggedTaintKey, timeAdded: '2026-12-06T21:00:00Z'}})
    expect(unpluggedTaintOf(t0, policies, t0 + 30_000)).to.deep.equal({taint: {effect: 'NoExecute', key: unpluggedTaintKey, timeAdded: '2026-12-06T21:00:30Z'}})
  })
})

describe('poolDevicesOf', function () {
  it('lists the present devices untainted and the gone ones as last seen with the unplugged taint, in name order', function () {
    const present = poolOf([b])
    const wasGone = gone(poolOf([a, b, c]), present)
    const {changesAt, devices} = poolDevicesOf(present, wasGone, () => ({}), t0 + 1000)
    expect(changesAt).to.equal(undefined)
    expect(devices.map((d) => d.name)).to.deep.equal([draNameOf(a), draNameOf(b), draNameOf(c)].sort())
    const before = poolOf([a, b, c]).devices
    for (const device of devices) {
      const was = before.find((d) => d.name === device.name)
      expect(device.attributes, 'attributes as last seen').to.deep.equal(was?.attributes)
      expect(device.taints).to.deep.equal(device.name === draNameOf(b) ? undefined : [{effect: 'NoSchedule', key: unpluggedTaintKey, timeAdded: '2026-12-06T21:00:00Z'}])
    }
  })

  it('says when the first gone device turns NoExecute', function () {
    const wasGone = gone(poolOf([a]), poolOf([]))
    const policy = {noExecuteAfterMs: 10_000}
    expect(poolDevicesOf(poolOf([]), wasGone, () => policy, t0).changesAt).to.equal(t0 + 10_000)
    const after = poolDevicesOf(poolOf([]), wasGone, () => policy, t0 + 10_000)
    expect([after.changesAt, after.devices[0].taints?.[0].effect]).to.deep.equal([undefined, 'NoExecute'])
  })

  it('a present device shadows a gone one of its name', function () {
    const wasGone = gone(poolOf([a]), poolOf([]))
    const {devices} = poolDevicesOf(poolOf([a]), wasGone, () => ({}), t0)
    expect(devices.map((d) => [d.name, d.taints])).to.deep.equal([[draNameOf(a), undefined]])
  })
})
