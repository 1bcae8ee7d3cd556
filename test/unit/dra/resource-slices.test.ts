import {expect} from 'chai'
import {createHash} from 'node:crypto'

import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import {dnsSubdomainPattern} from '../../../src/lib/devices/label-selector.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {classAttribute, draDeviceName, draDriver, nodeDevicesOf, nodeSlicesOf, sameDevices, sliceDeviceOf, sliceName, type SliceDevice} from '../../../src/lib/dra/resource-slices.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const cIdentifier = /^[A-Za-z_][A-Za-z0-9_]*$/
const domain = `${draDriver}/`

/** A USB serial adapter's tty, as the scanner reports it with its udev properties. */
function tty(minor: number, properties: Record<string, string>): Device {
  return {
    devName: `ttyUSB${minor}`,
    devNode: `/dev/ttyUSB${minor}`,
    devPath: `/devices/pci0000:00/usb1/1-${minor}/ttyUSB${minor}/tty/ttyUSB${minor}`,
    id: `c188:${minor}`,
    kernelName: `ttyUSB${minor}`,
    major: 188,
    minor,
    properties,
    subsystem: 'tty',
    type: 'char',
  }
}

const nameOf = (device: Device): string => draDeviceName(stableDeviceId(device))
const classIds = (device: SliceDevice): string[] =>
  Object.keys(device.attributes)
    .map((k) => k.slice(domain.length))
    .filter((id) => id.startsWith('class_') || id.startsWith('cls_'))

describe('draDeviceName', function () {
  it('turns a stable ID into a DNS label: lower case, runs of other characters as one dash', function () {
    expect(draDeviceName('FTDI_FT232R.A10-0123456789ab')).to.equal('ftdi-ft232r-a10-0123456789ab')
    expect(draDeviceName('A__B..C-d')).to.equal('a-b-c-d')
    expect(draDeviceName(stableDeviceId(loop(3)))).to.match(/^loop3-[0-9a-f]{12}$/)
  })

  it('never begins or ends with a dash, and is never empty', function () {
    expect(draDeviceName('_lead.trail_')).to.equal('lead-trail')
    expect(draDeviceName('---')).to.equal('device')
    expect(draDeviceName('')).to.equal('device')
    expect(draDeviceName('__..__')).to.equal('device')
  })

  it('keeps to 63 characters, with no dash left where the cut falls', function () {
    const cutAtDash = `${'a'.repeat(62)}_${'b'.repeat(20)}`
    expect(draDeviceName(cutAtDash)).to.equal('a'.repeat(62))
    for (const id of [cutAtDash, 'X'.repeat(200), `${'Ab.'.repeat(40)}-0123456789ab`, stableDeviceId(tty(0, {ID_SERIAL: `_${'Ü'.repeat(80)}`}))]) {
      const name = draDeviceName(id)
      expect(name.length, id).to.be.at.most(63)
      expect(name, id).to.match(dnsLabel)
    }
  })

  it('keeps devices apart whose serials fold to the same text (the stable ID hash differs)', function () {
    const a = tty(0, {ID_SERIAL: 'Vendor_Model.X'})
    const b = tty(1, {ID_SERIAL: 'vendor-model_x'})
    expect(nameOf(a)).to.not.equal(nameOf(b))
  })
})

describe('classAttribute', function () {
  it('is class_<name> with dashes as underscores for a short name without dots', function () {
    expect(classAttribute('usb-serial')).to.equal('class_usb_serial')
    expect(classAttribute('gpio')).to.equal('class_gpio')
    expect(classAttribute('0day')).to.equal('class_0day')
  })

  it('stays readable up to 32 characters (a 26-character name) and is hashed past that', function () {
    const fits = 'a'.repeat(24) + '-b'
    expect(classAttribute(fits)).to.equal(`class_${'a'.repeat(24)}_b`)
    expect(classAttribute(fits)).to.have.length(32)
    const past = 'a'.repeat(25) + '-b'
    expect(classAttribute(past)).to.not.equal(`class_${'a'.repeat(25)}_b`)
    expect(classAttribute(past)).to.match(/^cls_[a-z0-9_]*_[0-9a-f]{12}$/)
  })

  it('hashes any name with a dot, however short', function () {
    expect(classAttribute('a.b')).to.match(/^cls_a_b_[0-9a-f]{12}$/)
  })

  it('is a C identifier of at most 32 characters for every kind of class name', function () {
    const names = ['a', 'usb-serial', '0', 'a.b', 'usb.serial-0', 'x'.repeat(63), `${'a'.repeat(30)}.${'b'.repeat(32)}`, 'a-'.repeat(31).concat('z'), '9-9.9-9']
    for (const name of names) {
      const id = classAttribute(name)
      expect(id, name).to.match(cIdentifier)
      expect(id.length, name).to.be.at.most(32)
    }
  })

  it('tells apart names that fold to the same text: a-b and a.b, long names sharing a prefix', function () {
    const groups = [
      ['a-b', 'a.b'],
      ['a-b-c', 'a.b-c', 'a-b.c', 'a.b.c'],
      ['ab', 'a-b'],
      [`${'x'.repeat(30)}-1`, `${'x'.repeat(30)}-2`, `${'x'.repeat(30)}.1`],
      [`${'x'.repeat(63)}`, `${'x'.repeat(62)}y`],
    ]
    for (const group of groups) expect(new Set(group.map(classAttribute)).size, group.join(' ')).to.equal(group.length)
  })

  it('never gives a readable form that is another name\'s hashed form: a.b and a-b-<12 hex of sha256("a.b")> have different attributes', function () {
    // Were the two forms to meet, the DeviceClass of one would select the devices of the other.
    const hash = createHash('sha256').update('a.b').digest('hex').slice(0, 12)
    expect(classAttribute(`a-b-${hash}`)).to.not.equal(classAttribute('a.b'))
  })
})

describe('sliceDeviceOf', function () {
  const adapter = tty(0, {ID_MODEL_ID: '6001', ID_SERIAL: 'FTDI_FT232R_A10KXYZ', ID_SERIAL_SHORT: 'A10KXYZ', ID_VENDOR_ID: '0403'})

  it("names the device after its stable ID and describes it in the driver's domain, with one attribute per class", function () {
    const {device, dropped} = sliceDeviceOf(adapter, ['usb-serial', 'console'])
    expect(device.name).to.equal(draDeviceName(stableDeviceId(adapter)))
    expect(device.attributes).to.deep.equal({
      [`${domain}class_console`]: {bool: true},
      [`${domain}class_usb_serial`]: {bool: true},
      [`${domain}kernelName`]: {string: 'ttyUSB0'},
      [`${domain}major`]: {int: 188},
      [`${domain}minor`]: {int: 0},
      [`${domain}modelId`]: {string: '6001'},
      [`${domain}serial`]: {string: 'A10KXYZ'},
      [`${domain}stableId`]: {string: stableDeviceId(adapter)},
      [`${domain}subsystem`]: {string: 'tty'},
      [`${domain}type`]: {string: 'char'},
      [`${domain}vendorId`]: {string: '0403'},
    })
    expect(dropped).to.deep.equal([])
  })

  it('leaves out what udev does not know, and takes ID_SERIAL when there is no short serial', function () {
    const bare = sliceDeviceOf(loop(2), []).device
    expect(Object.keys(bare.attributes).sort()).to.deep.equal(['kernelName', 'major', 'minor', 'stableId', 'subsystem', 'type'].map((id) => `${domain}${id}`))
    const serialOnly = sliceDeviceOf(tty(1, {ID_SERIAL: 'Long_Serial'}), []).device
    expect(serialOnly.attributes[`${domain}serial`]).to.deep.equal({string: 'Long_Serial'})
  })

  it("every attribute name is the driver's domain and a C identifier of at most 32 characters", function () {
    const {device} = sliceDeviceOf(adapter, ['usb-serial', 'a.b', 'x'.repeat(63)])
    for (const key of Object.keys(device.attributes)) {
      const [prefix, id, ...rest] = key.split('/')
      expect(rest, key).to.deep.equal([])
      expect(prefix, key).to.equal(draDriver)
      expect(id, key).to.match(cIdentifier)
      expect(id.length, key).to.be.at.most(32)
    }
  })

  it('cuts string values to 64 characters', function () {
    const long = tty(3, {ID_MODEL_ID: 'm'.repeat(100), ID_SERIAL: 's'.repeat(200), ID_VENDOR_ID: 'v'.repeat(65)})
    const {device} = sliceDeviceOf({...long, devName: `a/${'k'.repeat(100)}`}, [])
    for (const [key, value] of Object.entries(device.attributes)) {
      if ('string' in value) expect(value.string.length, key).to.be.at.most(64)
    }
    expect(device.attributes[`${domain}serial`]).to.deep.equal({string: 's'.repeat(64)})
  })

  it("cuts string values to the API server's 64 bytes (it counts bytes, as Go's len does), never inside a character", function () {
    // udev keeps valid UTF-8 in a USB serial string; 40 characters of "é" are 80 bytes.
    const {device} = sliceDeviceOf(tty(4, {ID_SERIAL: 'é'.repeat(40)}), [])
    for (const [key, value] of Object.entries(device.attributes)) {
      if ('string' in value) expect(Buffer.byteLength(value.string), key).to.be.at.most(64)
    }
  })

  it('a device in 40 classes carries at most 32 attributes and reports the classes it could not carry', function () {
    const classes = Array.from({length: 40}, (_, i) => `class-${String(i).padStart(2, '0')}`).reverse()
    const bare = sliceDeviceOf(loop(1), classes)
    expect(Object.keys(bare.device.attributes)).to.have.length(32)
    expect(classIds(bare.device)).to.have.length(26)
    expect(bare.dropped).to.have.length(14)
    // Nothing is both carried and dropped, and nothing is lost.
    const carried = classIds(bare.device)
    expect(bare.dropped.filter((name) => carried.includes(classAttribute(name)))).to.deep.equal([])
    expect(carried.length + bare.dropped.length).to.equal(40)

    const full = sliceDeviceOf(adapter, classes)
    expect(Object.keys(full.device.attributes)).to.have.length(32)
    expect(full.dropped).to.have.length(40 - (32 - 9))
  })

  it('carries and drops the same classes whatever order they come in', function () {
    const classes = Array.from({length: 40}, (_, i) => `c${i}`)
    const shuffled = [...classes.slice(20), ...classes.slice(0, 20).reverse()]
    expect(sliceDeviceOf(loop(1), shuffled)).to.deep.equal(sliceDeviceOf(loop(1), classes))
  })
})

describe('nodeDevicesOf', function () {
  const zeta = tty(0, {ID_SERIAL: 'zeta', ID_SERIAL_SHORT: 'zeta'})
  const alpha = tty(1, {ID_SERIAL: 'alpha', ID_SERIAL_SHORT: 'alpha'})
  const mid = tty(2, {ID_SERIAL: 'mid', ID_SERIAL_SHORT: 'mid'})
  const classes = [deviceClass('serial', {allocation: 'DRA'}), deviceClass('console', {allocation: 'DRA'}), deviceClass('shared', {allocation: 'Class'}), deviceClass('units', {allocation: 'Device'})]
  const members = new Map<string, Device[]>([
    ['serial', [zeta, alpha]],
    ['console', [alpha, mid]],
    ['shared', [loop(4)]],
    ['units', [loop(5)]],
  ])

  it('lists the members of DRA classes only, one device per stable ID with one class attribute per class, in name order', function () {
    const node = nodeDevicesOf(classes, (name) => members.get(name) ?? [])
    expect(node.devices.map((d) => d.name)).to.deep.equal([nameOf(alpha), nameOf(mid), nameOf(zeta)])
    expect(node.devices.map((d) => d.name.split('-')[0])).to.deep.equal(['alpha', 'mid', 'zeta'])
    expect(node.devices.map((d) => classIds(d).sort())).to.deep.equal([['class_console', 'class_serial'], ['class_console'], ['class_serial']])
    expect([...node.byName]).to.deep.equal([
      [nameOf(alpha), alpha],
      [nameOf(mid), mid],
      [nameOf(zeta), zeta],
    ])
    expect(node.dropped.size).to.equal(0)
  })

  it('a device re-plugged under another kernel name is the same device', function () {
    const again = {...alpha, devName: 'ttyUSB7', devNode: '/dev/ttyUSB7', id: 'c188:7', minor: 7}
    const node = nodeDevicesOf([classes[0]], () => [again])
    expect(node.devices.map((d) => d.name)).to.deep.equal([nameOf(alpha)])
    expect(node.byName.get(nameOf(alpha))?.devNode).to.equal('/dev/ttyUSB7')
  })

  it('no DRA class: no devices', function () {
    const node = nodeDevicesOf(classes.slice(2), (name) => members.get(name) ?? [])
    expect([node.devices, [...node.byName], [...node.dropped]]).to.deep.equal([[], [], []])
  })

  it('reports, by device name, the classes a device in too many DRA classes could not be marked with', function () {
    const many = Array.from({length: 40}, (_, i) => deviceClass(`c${String(i).padStart(2, '0')}`, {allocation: 'DRA'}))
    const node = nodeDevicesOf(many, () => [loop(1)])
    expect(node.devices).to.have.length(1)
    expect([...node.dropped.keys()]).to.deep.equal([nameOf(loop(1))])
    expect(node.dropped.get(nameOf(loop(1)))).to.deep.equal(Array.from({length: 14}, (_, i) => `c${26 + i}`))
  })
})

describe('sliceName', function () {
  it('is <node>-devices.nfdctl.io-<index>', function () {
    expect(sliceName('worker-1', 0)).to.equal('worker-1-devices.nfdctl.io-0')
    expect(sliceName('worker-1', 12)).to.equal('worker-1-devices.nfdctl.io-12')
  })

  it('keeps to 253 characters, the longest node names included, and keeps long names apart', function () {
    const fits = 'n'.repeat(253 - '-devices.nfdctl.io-0'.length)
    expect(sliceName(fits, 0)).to.equal(`${fits}-devices.nfdctl.io-0`)
    expect(sliceName(fits, 0)).to.have.length(253)
    const longest = 'n'.repeat(253)
    const other = `${'n'.repeat(252)}m`
    for (const [node, index] of [
      [`${fits}n`, 0],
      [longest, 0],
      [longest, 127],
      [other, 0],
    ] as const) {
      const name = sliceName(node, index)
      expect(name.length, `${node.length} ${index}`).to.be.at.most(253)
      expect(name).to.match(new RegExp(`-devices\\.nfdctl\\.io-${index}$`))
    }
    expect(sliceName(longest, 0)).to.not.equal(sliceName(other, 0))
    expect(sliceName(longest, 0)).to.not.equal(sliceName(longest, 1))
  })

  it('is a DNS subdomain, as an object name must be, when the shortened node name ends in a dot', function () {
    // Labels of at most 63 characters; the cut (220 characters) falls just after a dot.
    const node = ['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(27), 'e'.repeat(33)].join('.')
    expect(node).to.have.length(253)
    expect(node).to.match(dnsSubdomainPattern)
    expect(sliceName(node, 0)).to.match(dnsSubdomainPattern)
  })
})

describe('nodeSlicesOf', function () {
  const devices = (count: number): SliceDevice[] => Array.from({length: count}, (_, i) => ({attributes: {[`${domain}minor`]: {int: i}}, name: `d${i}`}))

  it('300 devices: 3 slices of at most 128, each of the whole pool (the node, one generation, 3 slices)', function () {
    const all = devices(300)
    const slices = nodeSlicesOf('worker-1', all, 7)
    expect(slices.map((s) => s.spec.devices.length)).to.deep.equal([128, 128, 44])
    expect(slices.flatMap((s) => s.spec.devices)).to.deep.equal(all)
    expect(slices.map((s) => s.metadata.name)).to.deep.equal([0, 1, 2].map((i) => sliceName('worker-1', i)))
    for (const slice of slices) {
      expect(slice).to.deep.include({apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice'})
      expect(slice.spec).to.deep.include({driver: 'devices.nfdctl.io', nodeName: 'worker-1', pool: {generation: 7, name: 'worker-1', resourceSliceCount: 3}})
    }
  })

  it('128 devices fit one slice; 129 take two', function () {
    expect(nodeSlicesOf('n', devices(128), 1).map((s) => [s.spec.devices.length, s.spec.pool.resourceSliceCount])).to.deep.equal([[128, 1]])
    expect(nodeSlicesOf('n', devices(129), 1).map((s) => [s.spec.devices.length, s.spec.pool.resourceSliceCount])).to.deep.equal([
      [128, 2],
      [1, 2],
    ])
  })

  it('once any device is tainted, 64 devices a slice (the API server refuses more beside a taint)', function () {
    const all = devices(129).map((d, i) => (i === 5 ? {...d, taints: [{effect: 'NoSchedule' as const, key: 'devices.nfdctl.io/unplugged'}]} : d))
    expect(nodeSlicesOf('n', all, 1).map((s) => s.spec.devices.length)).to.deep.equal([64, 64, 1])
  })

  it('no devices: one empty slice, so that the pool is known to be empty', function () {
    expect(nodeSlicesOf('worker-1', [], 3)).to.deep.equal([
      {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceSlice',
        metadata: {name: 'worker-1-devices.nfdctl.io-0'},
        spec: {devices: [], driver: 'devices.nfdctl.io', nodeName: 'worker-1', pool: {generation: 3, name: 'worker-1', resourceSliceCount: 1}},
      },
    ])
  })
})

describe('sameDevices', function () {
  const node = nodeDevicesOf([deviceClass('serial', {allocation: 'DRA'}), deviceClass('console', {allocation: 'DRA'})], (name) => (name === 'serial' ? [loop(1), loop(2)] : [loop(2)]))
  const [want] = nodeSlicesOf('worker-1', node.devices, 2)
  /** The slice as the API server may return it: its own generation, attribute keys in another order. */
  const asRead = (devices: readonly SliceDevice[], pool = want.spec.pool) => ({
    spec: {...want.spec, devices: devices.map((d) => ({...d, attributes: Object.fromEntries(Object.entries(d.attributes).reverse())})), pool: {...pool, generation: 9}},
  })

  it('ignores the generation and the order of attribute keys', function () {
    expect(Object.keys(asRead(want.spec.devices).spec.devices[0].attributes)).to.not.deep.equal(Object.keys(want.spec.devices[0].attributes))
    expect(sameDevices(asRead(want.spec.devices), want)).to.equal(true)
  })

  it('sees a changed attribute value, a device more or less, another slice count or another node', function () {
    const changed = want.spec.devices.map((d, i) => (i === 0 ? {...d, attributes: {...d.attributes, [`${domain}minor`]: {int: 99}}} : d))
    expect(sameDevices(asRead(changed), want)).to.equal(false)
    expect(sameDevices(asRead(want.spec.devices.slice(1)), want)).to.equal(false)
    expect(sameDevices(asRead([...want.spec.devices, {attributes: {}, name: 'extra'}]), want)).to.equal(false)
    expect(sameDevices(asRead(want.spec.devices, {...want.spec.pool, resourceSliceCount: 2}), want)).to.equal(false)
    expect(sameDevices({spec: {...asRead(want.spec.devices).spec, nodeName: 'worker-2'}}, want)).to.equal(false)
  })

  it('sees a taint gained, lost or changed in effect or time', function () {
    const taint = {effect: 'NoSchedule' as const, key: 'devices.nfdctl.io/unplugged', timeAdded: '2026-12-06T21:00:00Z'}
    const tainted = (t: object) => ({spec: {...want.spec, devices: want.spec.devices.map((d, i) => (i === 0 ? {...d, taints: [{...taint, ...t}]} : d))}})
    expect(sameDevices(asRead(tainted({}).spec.devices), want)).to.equal(false)
    expect(sameDevices(asRead(want.spec.devices), tainted({}))).to.equal(false)
    expect(sameDevices(asRead(tainted({}).spec.devices), tainted({}))).to.equal(true)
    expect(sameDevices(asRead(tainted({effect: 'NoExecute'}).spec.devices), tainted({}))).to.equal(false)
    expect(sameDevices(asRead(tainted({timeAdded: '2026-12-06T21:00:01Z'}).spec.devices), tainted({}))).to.equal(false)
  })

  it('sees a class attribute gained or lost', function () {
    const lost = want.spec.devices.map((d) => ({...d, attributes: Object.fromEntries(Object.entries(d.attributes).filter(([k]) => k !== `${domain}class_console`))}))
    expect(sameDevices(asRead(lost), want)).to.equal(false)
  })
})
