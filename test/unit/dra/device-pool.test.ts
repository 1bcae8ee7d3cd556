import {expect} from 'chai'

import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {DevicePool} from '../../../src/lib/dra/device-pool.js'
import type {SliceDevice} from '../../../src/lib/dra/resource-slices.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {draNameOf} from '../../support/dra-claims.js'
import {recordingLogger} from '../../support/recording-logger.js'
import {VirtualTimers} from '../../support/virtual-timers.js'

const deviceA = loopDevice(1, {ID_SERIAL_SHORT: 'serial-a'})
const deviceB = loopDevice(2, {ID_SERIAL_SHORT: 'serial-b'})

describe('DevicePool', function () {
  /** A pool over classes whose members the test changes, its slices, DeviceClasses and publications recorded. */
  function pool(classes: DeviceClass[], members: Map<string, Device[]>, onNode?: () => Device[]) {
    const published: string[][] = []
    const slices: Array<readonly SliceDevice[]> = []
    const clock = new VirtualTimers()
    const synced: string[][] = []
    let told = 0
    const log = recordingLogger()
    const made = new DevicePool({
      clusterClasses: () => [...classes, deviceClass('other-node', {allocation: 'DRA'})],
      deviceClasses: {sync: async (all) => void synced.push(all.map((c) => c.metadata.name))},
      logger: log,
      clock,
      members: {classNames: classes.map((c) => c.metadata.name), classes, of: (name) => members.get(name) ?? [], present: onNode ?? (() => [...new Set([...members.values()].flat())])},
      onPublished: () => void told++,
      slices: {
        setDevices: (devices: readonly SliceDevice[]) => {
          slices.push(devices)
          published.push(devices.map((d) => d.name))
        },
      },
    })
    return {clock, log, made, published, slices, synced, told: () => told}
  }

  it('a device change of a DRA class is published at the flush: the slices get the devices, the claims are told', function () {
    const members = new Map([['serial', [deviceA]]])
    const {made, published, told} = pool([deviceClass('serial', {allocation: 'DRA'})], members)
    made.compute()
    expect(published).to.deep.equal([[draNameOf(deviceA)]])
    members.set('serial', [deviceA, deviceB])
    made.devicesChanged(new Set(['serial']))
    expect(published, 'nothing before the flush').to.have.length(1)
    made.flush()
    expect(published.at(-1)).to.deep.equal([draNameOf(deviceA), draNameOf(deviceB)].sort())
    expect(made.devices.byName.get(draNameOf(deviceB))).to.equal(deviceB)
    expect(told()).to.equal(1)
    made.flush()
    expect(published, 'a flush with nothing changed publishes nothing').to.have.length(2)
  })

  it('a change of classes that are not DRA publishes nothing', function () {
    const members = new Map([
      ['serial', [deviceA]],
      ['plain', [deviceB]],
    ])
    const {made, published, told} = pool([deviceClass('serial', {allocation: 'DRA'}), deviceClass('plain', {allocation: 'Class'})], members)
    made.devicesChanged(new Set(['plain']))
    made.flush()
    expect([published, told()]).to.deep.equal([[], 0])
  })

  it("classes changed: the cluster's resource.k8s.io DeviceClasses are synced and the whole pool published", function () {
    const {made, published, synced, told} = pool([deviceClass('serial', {allocation: 'DRA'})], new Map([['serial', [deviceA]]]))
    made.classesChanged()
    expect(synced).to.deep.equal([['serial', 'other-node']])
    expect(published).to.deep.equal([[draNameOf(deviceA)]])
    expect(told()).to.equal(1)
  })

  it('a device in more DRA classes than its slice entry can name is told once, however often the pool is published', function () {
    const classes = Array.from({length: 30}, (_, i) => deviceClass(`c${String(i).padStart(2, '0')}`, {allocation: 'DRA'}))
    const {log, made} = pool(classes, new Map(classes.map((c) => [c.metadata.name, [deviceA]])))
    made.compute()
    made.publish(new Set(['c00']))
    made.classesChanged()
    const warnings = log.lines.filter((l) => l.level === 'warn')
    expect(warnings.map((l) => l.msg)).to.deep.equal(['device is in more classes than a ResourceSlice device can name; claims of these classes cannot get it'])
    expect(warnings[0].fields).to.deep.equal({classes: ['c25', 'c26', 'c27', 'c28', 'c29'], device: draNameOf(deviceA)})
  })

  it('an unplugged device stays in the slices with the NoSchedule taint, not among the present devices; re-plugged, untainted', function () {
    const members = new Map([['serial', [deviceA, deviceB]]])
    const {made, slices} = pool([deviceClass('serial', {allocation: 'DRA'})], members)
    made.compute()
    members.set('serial', [deviceB])
    made.publish(new Set(['serial']))
    const taintOf = (name: string) =>
      slices
        .at(-1)
        ?.find((d) => d.name === name)
        ?.taints?.map((t) => [t.key, t.effect])
    expect(slices.at(-1)?.map((d) => d.name)).to.deep.equal([draNameOf(deviceA), draNameOf(deviceB)].sort())
    expect(taintOf(draNameOf(deviceA))).to.deep.equal([['devices.nfdctl.io/unplugged', 'NoSchedule']])
    expect(taintOf(draNameOf(deviceB))).to.equal(undefined)
    expect([...made.devices.byName.keys()], 'claims see only present devices').to.deep.equal([draNameOf(deviceB)])
    members.set('serial', [deviceA, deviceB])
    made.publish(new Set(['serial']))
    expect(slices.at(-1)?.map((d) => [d.name, d.taints])).to.deep.equal([draNameOf(deviceA), draNameOf(deviceB)].sort().map((n) => [n, undefined]))
  })

  it('a device a class edit leaves out (still on the node) leaves the slices', function () {
    const members = new Map([['serial', [deviceA, deviceB]]])
    const {made, published} = pool([deviceClass('serial', {allocation: 'DRA'})], members, () => [deviceA, deviceB])
    made.compute()
    members.set('serial', [deviceB])
    made.publish(new Set(['serial']))
    expect(published.at(-1)).to.deep.equal([draNameOf(deviceB)])
  })

  it('a class with unplugged NoExecute after 30s: NoSchedule at the unplug, published again as NoExecute 30 s later; stop() cancels the wait', async function () {
    const members = new Map([['serial', [deviceA]]])
    const {clock, made, slices, told} = pool([deviceClass('serial', {allocation: 'DRA', unplugged: {effect: 'NoExecute', noExecuteAfter: '30s'}})], members)
    made.compute()
    members.set('serial', [])
    made.publish(new Set(['serial']))
    expect(slices.at(-1)?.[0].taints?.[0].effect).to.equal('NoSchedule')
    await clock.advanceTo(29_999)
    expect(slices).to.have.length(2)
    await clock.advanceTo(30_000)
    expect(slices.at(-1)?.[0].taints?.[0].effect).to.equal('NoExecute')
    expect(told()).to.equal(2)
    expect(clock.pending).to.equal(0)

    members.set('serial', [deviceA])
    made.publish(new Set(['serial']))
    members.set('serial', [])
    made.publish(new Set(['serial']))
    expect(clock.pending).to.equal(1)
    made.stop()
    expect(clock.pending).to.equal(0)
  })
})
