import {expect} from 'chai'

import {ClassMemory, DeviceMatcher} from '../../../src/lib/devices/device-matcher.js'
import type {AttributeReader, Device, MatchRule} from '../../../src/lib/devices/types.js'
import {deviceClass} from '../../support/device-class.js'

function device(overrides: Partial<Device> & {devName: string}): Device {
  return {
    devNode: `/dev/${overrides.devName}`,
    devPath: `/devices/x/${overrides.devName}`,
    id: `c1:${overrides.devName.length}`,
    kernelName: overrides.devName,
    major: 1,
    minor: 1,
    properties: {},
    subsystem: 'tty',
    type: 'char',
    ...overrides,
  }
}

// A fake sysfs: attributes by device path, looked up on the device then on each parent directory.
function attributes(tree: Record<string, Record<string, string>>): AttributeReader {
  return (dev, name) => {
    for (let path = dev.devPath; path.length > 1; path = path.slice(0, path.lastIndexOf('/')) || '/') {
      const value = tree[path]?.[name]
      if (value !== undefined) return value
    }
    return undefined
  }
}

const usbSerial = device({
  devName: 'ttyUSB0',
  devPath: '/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0',
  properties: {ID_MODEL: 'FT232R_USB_UART', ID_VENDOR_ID: '0403'},
  subsystem: 'tty',
})
const sysfs = attributes({
  '/devices/pci0000:00/0000:00:14.0/usb1/1-1': {idProduct: '6001', idVendor: '0403', manufacturer: 'FTDI'},
  '/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0': {dev: '188:0'},
})

describe('DeviceMatcher', () => {
  const cases: Array<[string, MatchRule[], Device, boolean]> = [
    ['exact subsystem', [{subsystem: 'tty'}], usbSerial, true],
    ['other subsystem', [{subsystem: 'block'}], usbSerial, false],
    ['devName glob', [{devName: 'ttyUSB*'}], usbSerial, true],
    ['devName glob that does not match', [{devName: 'ttyACM*'}], usbSerial, false],
    ['devName character class', [{devName: 'ttyUSB[0-3]'}], usbSerial, true],
    ['devName ? wildcard', [{devName: 'ttyUSB?'}], usbSerial, true],
    ['* does not cross /', [{devName: 'input*'}], device({devName: 'input/event3', subsystem: 'input'}), false],
    ['a path glob over DEVNAME', [{devName: 'input/event*'}], device({devName: 'input/event3', subsystem: 'input'}), true],
    ['property glob', [{properties: {ID_MODEL: 'FT232*'}}], usbSerial, true],
    ['missing property', [{properties: {ID_SERIAL: '*'}}], usbSerial, false],
    ['attribute on the device itself', [{attributes: {dev: '188:*'}}], usbSerial, true],
    ['attribute on a parent (usb device)', [{attributes: {idVendor: '0403', idProduct: '6001'}}], usbSerial, true],
    ['attribute with another value', [{attributes: {idVendor: '10c4'}}], usbSerial, false],
    ['attribute nobody has', [{attributes: {serial: '*'}}], usbSerial, false],
    ['fields of one rule are AND-ed (one fails)', [{attributes: {idVendor: '0403'}, subsystem: 'tty', devName: 'ttyACM*'}], usbSerial, false],
    ['fields of one rule are AND-ed (all hold)', [{attributes: {idVendor: '0403'}, devName: 'ttyUSB*', properties: {ID_VENDOR_ID: '0403'}, subsystem: 'tty'}], usbSerial, true],
    ['rules are OR-ed', [{subsystem: 'block'}, {devName: 'ttyUSB0'}], usbSerial, true],
    ['no rule matches', [{subsystem: 'block'}, {devName: 'nvme*'}], usbSerial, false],
  ]
  for (const [name, match, dev, expected] of cases) {
    it(`${name}: ${expected ? 'in' : 'not in'} the class`, () => {
      expect(new DeviceMatcher([deviceClass('c', {match})]).classesOf(dev, sysfs)).to.deep.equal(expected ? ['c'] : [])
    })
  }

  it('returns every class a device is in, in class order', () => {
    const matcher = new DeviceMatcher([
      deviceClass('serial', {match: [{subsystem: 'tty'}]}),
      deviceClass('disks', {match: [{subsystem: 'block'}]}),
      deviceClass('ftdi', {match: [{attributes: {idVendor: '0403'}}]}),
    ])
    expect(matcher.classesOf(usbSerial, sysfs)).to.deep.equal(['serial', 'ftdi'])
  })

  it('reads attributes only when the cheaper fields matched', () => {
    const asked: string[] = []
    const reader: AttributeReader = (_d, name) => {
      asked.push(name)
      return undefined
    }
    new DeviceMatcher([deviceClass('c', {match: [{attributes: {idVendor: '*'}, subsystem: 'block'}]})]).classesOf(usbSerial, reader)
    expect(asked).to.deep.equal([])
  })
})

describe('ClassMemory', () => {
  it('remembers the classes of a removed device, whose attributes are gone', () => {
    let present = true
    const reader: AttributeReader = (_d, name) => (present && name === 'idVendor' ? '0403' : undefined)
    const memory = new ClassMemory(new DeviceMatcher([deviceClass('ftdi', {match: [{attributes: {idVendor: '0403'}}]})]), reader)
    expect(memory.classesAfter('add', usbSerial)).to.deep.equal(['ftdi'])
    present = false
    expect(memory.classesAfter('remove', usbSerial)).to.deep.equal(['ftdi'])
    // Forgotten after removal: a later remove of the same id is matched afresh.
    expect(memory.classesAfter('remove', usbSerial)).to.deep.equal([])
  })
})

describe('DeviceMatcher: glob flavours', () => {
  const nic = device({devName: 'net/tun', properties: {ID_MODEL_FROM_DATABASE: 'USB 10/100 LAN', ID_PATH: 'pci-0000:00:14.0-usb-0:1:1.0'}, subsystem: 'misc'})
  const cases: Array<[string, MatchRule, boolean]> = [
    ['* in a property value crosses /', {properties: {ID_MODEL_FROM_DATABASE: 'USB*'}}, true],
    ['*…* around a / in a property value', {properties: {ID_MODEL_FROM_DATABASE: '*10/100*'}}, true],
    ['* in an attribute value crosses /', {attributes: {product: '*Bridge / Serial'}}, true],
    ['* in devName stops at /', {devName: 'net*'}, false],
    ['devName with a path glob', {devName: 'net/*'}, true],
  ]
  const reader: AttributeReader = (_d, name) => (name === 'product' ? 'CP2102 USB to UART Bridge / Serial' : undefined)
  for (const [name, rule, expected] of cases) {
    it(name, () => {
      expect(new DeviceMatcher([deviceClass('c', {match: [rule]})]).classesOf(nic, reader)).to.deep.equal(expected ? ['c'] : [])
    })
  }
})
