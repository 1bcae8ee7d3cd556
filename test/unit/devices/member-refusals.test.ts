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
