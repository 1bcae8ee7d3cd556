import {expect} from 'chai'

import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {DevicePool} from '../../../src/lib/dra/device-pool.js'
import type {SliceDevice} from '../../../src/lib/dra/resource-slices.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {draNameOf} from '../../support/dra-claims.js'
import {recordingLogger} from '../../support/recording-logger.js'

const deviceA = loopDevice(1, {ID_SERIAL_SHORT: 'serial-a'})
const deviceB = loopDevice(2, {ID_SERIAL_SHORT: 'serial-b'})

describe('DevicePool', function () {
  /** A pool over classes whose members the test changes, its slices, DeviceClasses and publications recorded. */
  function pool(classes: DeviceClass[], members: Map<string, Device[]>) {
    const published: string[][] = []
    const synced: string[][] = []
    let told = 0
    const log = recordingLogger()
    const made = new DevicePool({
      clusterClasses: () => [...classes, deviceClass('other-node', {allocation: 'DRA'})],
      deviceClasses: {sync: async (all) => void synced.push(all.map((c) => c.metadata.name))},
      logger: log,
      members: {classNames: classes.map((c) => c.metadata.name), classes, of: (name) => members.get(name) ?? []},
      onPublished: () => void told++,
      slices: {setDevices: (devices: readonly SliceDevice[]) => void published.push(devices.map((d) => d.name))},
    })
    return {log, made, published, synced, told: () => told}
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
})
