import {expect} from 'chai'

import {servedMembers} from '../../../src/lib/devices/member-refusals.js'
import type {Device, DeviceClass, DeviceClassSpec} from '../../../src/lib/devices/types.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const matched = (entries: Array<[string, Device[]]>): Map<string, Map<string, Device>> => new Map(entries.map(([name, devices]) => [name, new Map(devices.map((d) => [d.id, d]))]))
const ids = (devices: readonly Device[] | undefined): string[] => (devices ?? []).map((d) => d.id)
const cls = (name: string, spec: Partial<DeviceClassSpec>): DeviceClass => deviceClass(name, spec)

describe('servedMembers', function () {
  it('Class classes may share devices: every holder of either gets them', function () {
    const {refusals, served} = servedMembers(
      [cls('a', {}), cls('b', {})],
      matched([
        ['a', [loop(1)]],
        ['b', [loop(1), loop(2)]],
      ]),
    )
    expect(refusals).to.deep.equal([])
    expect(ids(served.get('b'))).to.deep.equal(['b7:1', 'b7:2'])
  })

  for (const [other, spec] of [
    ['a Class class with annotation access', {annotationAccess: {namespaceSelector: {}}}],
    ['another Device class', {allocation: 'Device'}],
    ['a DRA class', {allocation: 'DRA'}],
  ] as const) {
    it(`a device in a Device class and in ${other} is refused in both, naming the other class; the rest are served`, function () {
      const classes = [cls('units', {allocation: 'Device'}), cls('other', spec)]
      const {refusals, served} = servedMembers(
        classes,
        matched([
          ['units', [loop(1), loop(2)]],
          ['other', [loop(1), loop(3)]],
        ]),
      )
      expect(ids(served.get('units'))).to.deep.equal(['b7:2'])
      expect(ids(served.get('other'))).to.deep.equal(['b7:3'])
      expect(refusals.map((r) => [r.className, r.device.id, r.reason])).to.deep.equal([
        ['units', 'b7:1', 'ExclusiveOverlap'],
        ['other', 'b7:1', 'ExclusiveOverlap'],
      ])
      expect(refusals[0].message).to.include('also in class other (allocation').and.include('must be in no other class')
      expect(refusals[1].message).to.include('also in class units (allocation Device)')
    })
  }

  it('DRA classes may share a device (one slice, one allocation) when they follow it by the same identity', function () {
    const same = servedMembers(
      [cls('x', {allocation: 'DRA'}), cls('y', {allocation: 'DRA', identity: 'Serial'})],
      matched([
        ['x', [loop(1)]],
        ['y', [loop(1)]],
      ]),
    )
    expect(same.refusals).to.deep.equal([])
    const differ = servedMembers(
      [cls('x', {allocation: 'DRA'}), cls('y', {allocation: 'DRA', identity: 'Port'})],
      matched([
        ['x', [loop(1)]],
        ['y', [loop(1)]],
      ]),
    )
    expect(differ.refusals.map((r) => r.reason)).to.deep.equal(['ExclusiveOverlap', 'ExclusiveOverlap'])
    expect(differ.refusals[0].message).to.include('identity Port')
  })

  it('two present devices with one identity are served to nobody in the class, with both named; a third is served', function () {
    // Identical serial-less adapters with one port path: what a hub that repeats ID_PATH, or a forged record, gives.
    const twin = (minor: number): Device => loop(minor, {ID_PATH: 'pci-0000:00:14.0-usb-0:1:1.0'})
    const {refusals, served} = servedMembers([cls('disks', {allocation: 'Device'})], matched([['disks', [twin(1), twin(2), loop(3)]]]))
    expect(ids(served.get('disks'))).to.deep.equal(['b7:3'])
    expect(refusals.map((r) => [r.device.id, r.reason])).to.deep.equal([
      ['b7:1', 'DuplicateIdentity'],
      ['b7:2', 'DuplicateIdentity'],
    ])
    expect(refusals[0].message).to.equal(
      '/dev/loop1 has the same port identity as /dev/loop2 in class disks (pci-0000:00:14.0-usb-0:1:1.0): served to nobody while both are present; plug them into different ports, or narrow the class to one of them',
    )
  })

  it('a copied serial number refuses both the original and the copy; identity Port tells them apart by port', function () {
    const forged = (minor: number, port: string): Device => loop(minor, {ID_PATH: port, ID_SERIAL: 'Vendor_Model_A10', ID_SERIAL_SHORT: 'A10'})
    const devices: Array<[string, Device[]]> = [['serial', [forged(1, 'usb-0:1'), forged(2, 'usb-0:2')]]]
    const bySerial = servedMembers([cls('serial', {allocation: 'DRA'})], matched(devices))
    expect(ids(bySerial.served.get('serial'))).to.deep.equal([])
    expect(bySerial.refusals[0].message).to.include('two devices claim one serial number')
    const byPort = servedMembers([cls('serial', {allocation: 'DRA', identity: 'Port'})], matched(devices))
    expect(ids(byPort.served.get('serial'))).to.deep.equal(['b7:1', 'b7:2'])
  })

  it('identity SerialAndPort: a copied serial at another port is another device, both served; the victim is never refused for it', function () {
    const forged = (minor: number, port: string): Device => loop(minor, {ID_PATH: port, ID_SERIAL: 'Vendor_Model_A10', ID_SERIAL_SHORT: 'A10'})
    const {refusals, served} = servedMembers([cls('shared', {allocation: 'DRA', identity: 'SerialAndPort'})], matched([['shared', [forged(1, 'usb-0:1'), forged(2, 'usb-0:2')]]]))
    expect(refusals).to.deep.equal([])
    expect(ids(served.get('shared'))).to.deep.equal(['b7:1', 'b7:2'])
    // One serial at one port twice (a hub that repeats ID_PATH, a forged udev record): refused as any duplicate.
    const twice = servedMembers([cls('shared', {allocation: 'DRA', identity: 'SerialAndPort'})], matched([['shared', [forged(1, 'usb-0:1'), forged(2, 'usb-0:1')]]]))
    expect(twice.refusals.map((r) => r.reason)).to.deep.equal(['DuplicateIdentity', 'DuplicateIdentity'])
    expect(twice.refusals[0].message).to.include('the same serial and port identity').and.include('unplug the copy')
  })

  describe('one holder per physical device', function () {
    /** A disk and its partitions as sysfs places them: each partition's directory inside its disk's. */
    const disk = loop(40)
    const part = (n: number): Device => ({
      ...loop(40),
      devName: `loop40p${n}`,
      devNode: `/dev/loop40p${n}`,
      devPath: `${disk.devPath}/loop40p${n}`,
      devType: 'partition',
      id: `b259:${n}`,
      kernelName: `loop40p${n}`,
    })
    /** A USB modem: its usbfs node drives the whole device; its interfaces' ttys sit inside it. */
    const usbDevice = (path: string, minor: number): Device => ({
      devName: `bus/usb/001/${String(minor).padStart(3, '0')}`,
      devNode: `/dev/bus/usb/001/${String(minor).padStart(3, '0')}`,
      devPath: `/devices/pci0000:00/0000:00:14.0/usb1/${path}`,
      devType: 'usb_device',
      id: `c189:${minor}`,
      kernelName: path,
      major: 189,
      minor,
      properties: {},
      subsystem: 'usb',
      type: 'char',
    })
    const tty = (path: string, iface: number, minor: number): Device => ({
      devName: `ttyACM${minor}`,
      devNode: `/dev/ttyACM${minor}`,
      devPath: `/devices/pci0000:00/0000:00:14.0/usb1/${path}/${path.split('/').at(-1)}:1.${iface}/tty/ttyACM${minor}`,
      id: `c166:${minor}`,
      kernelName: `ttyACM${minor}`,
      major: 166,
      minor,
      properties: {},
      subsystem: 'tty',
      type: 'char',
    })

    it('a disk in a Device class and its partition in a Class class are refused in both, each naming the other; another partition stays served', function () {
      const {refusals, served} = servedMembers(
        [cls('disks', {allocation: 'Device'}), cls('parts', {})],
        matched([
          ['disks', [disk]],
          ['parts', [part(1)]],
        ]),
      )
      expect(ids(served.get('disks'))).to.deep.equal([])
      expect(ids(served.get('parts'))).to.deep.equal([])
      expect(refusals.map((r) => [r.className, r.device.id, r.reason])).to.deep.equal([
        ['disks', 'b7:40', 'ExclusiveOverlap'],
        ['parts', 'b259:1', 'ExclusiveOverlap'],
      ])
      expect(refusals[0].message).to.match(/^\/dev\/loop40 holds \/dev\/loop40p1 in class parts \(allocation Class\); a device and its parts go to one holder at a time/)
      expect(refusals[1].message).to.match(/^\/dev\/loop40p1 is part of \/dev\/loop40 in class disks \(allocation Device\); /)
      const other = servedMembers(
        [cls('disks', {allocation: 'Device'}), cls('parts', {})],
        matched([
          ['disks', [loop(41)]],
          ['parts', [part(1)]],
        ]),
      )
      expect(other.refusals).to.deep.equal([])
    })

    it('a Device class that matches a disk and its partitions refuses them all; partitions alone (side by side) are served one holder each', function () {
      const all = servedMembers([cls('disks', {allocation: 'Device'})], matched([['disks', [disk, part(1), part(2)]]]))
      expect(ids(all.served.get('disks'))).to.deep.equal([])
      expect(all.refusals[0].message).to.include('/dev/loop40 holds /dev/loop40p1 in class disks (allocation Device) and holds /dev/loop40p2 in class disks')
      const parts = servedMembers([cls('disks', {allocation: 'Device'})], matched([['disks', [part(1), part(2)]]]))
      expect(parts.refusals).to.deep.equal([])
      expect(ids(parts.served.get('disks'))).to.deep.equal(['b259:1', 'b259:2'])
    })

    it('Class classes share a disk and its partitions freely', function () {
      const {refusals} = servedMembers(
        [cls('disks', {}), cls('parts', {})],
        matched([
          ['disks', [disk]],
          ['parts', [part(1)]],
        ]),
      )
      expect(refusals).to.deep.equal([])
    })

    it("a modem's usbfs node in a DRA class and its tty in a Class class: both refused; the ttys of another device and of one device's interfaces side by side are not", function () {
      const modem = usbDevice('1-2', 5)
      const {refusals, served} = servedMembers(
        [cls('raw-usb', {allocation: 'DRA'}), cls('modems', {}), cls('ports', {allocation: 'Device'})],
        matched([
          ['raw-usb', [modem]],
          ['modems', [tty('1-2', 0, 0), tty('1-3', 0, 1)]],
          ['ports', [tty('1-4', 0, 2), tty('1-4', 2, 3)]],
        ]),
      )
      expect(refusals.map((r) => [r.className, r.device.devNode])).to.deep.equal([
        ['raw-usb', '/dev/bus/usb/001/005'],
        ['modems', '/dev/ttyACM0'],
      ])
      expect(refusals[0].message).to.include('/dev/bus/usb/001/005 holds /dev/ttyACM0 in class modems (allocation Class)')
      expect(ids(served.get('modems'))).to.deep.equal(['c166:1'])
      expect(ids(served.get('ports'))).to.deep.equal(['c166:2', 'c166:3'])
    })

    it("a hub's usbfs node holds what hangs from it: a device class on the hub refuses the devices below", function () {
      const hub = usbDevice('1-2', 4)
      const below = usbDevice('1-2/1-2.3', 6)
      const {refusals} = servedMembers(
        [cls('hubs', {allocation: 'Device'}), cls('modems', {}), cls('raw', {})],
        matched([
          ['hubs', [hub]],
          ['modems', [tty('1-2/1-2.3', 0, 0)]],
          ['raw', [below]],
        ]),
      )
      expect(refusals.map((r) => r.device.devNode)).to.deep.equal(['/dev/bus/usb/001/004', '/dev/ttyACM0', '/dev/bus/usb/001/006'])
      expect(refusals[0].message).to.include('/dev/bus/usb/001/004 holds /dev/ttyACM0 in class modems (allocation Class) and holds /dev/bus/usb/001/006 in class raw')
      // Its own device is only in a Class class, as the tty is: that pair is shared freely; the hub is not.
      expect(refusals[1].message).to.match(/^\/dev\/ttyACM0 is part of \/dev\/bus\/usb\/001\/004 in class hubs \(allocation Device\); /)
    })

    it('names at most three parts, and how many more', function () {
      const {refusals} = servedMembers(
        [cls('disks', {allocation: 'Device'}), cls('parts', {})],
        matched([
          ['disks', [disk]],
          ['parts', [1, 2, 3, 4, 5].map(part)],
        ]),
      )
      expect(refusals[0].message).to.include('and holds /dev/loop40p3 in class parts (allocation Class) and 2 more;')
    })
  })

  it('refuse() refuses a device by what it is, in every class that matches it', function () {
    const {refusals, served} = servedMembers(
      [cls('a', {}), cls('b', {})],
      matched([
        ['a', [loop(1), loop(2)]],
        ['b', [loop(2)]],
      ]),
      (d) => (d.minor === 2 ? {message: 'the node needs it', reason: 'HostCritical'} : undefined),
    )
    expect(ids(served.get('a'))).to.deep.equal(['b7:1'])
    expect(ids(served.get('b'))).to.deep.equal([])
    expect(refusals.map((r) => `${r.className} ${r.device.id} ${r.reason}`)).to.deep.equal(['a b7:2 HostCritical', 'b b7:2 HostCritical'])
  })
})
