import {expect} from 'chai'

import {deviceIdentity, stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'

/** A USB serial adapter at a port: udev's properties as it records them (ID_SERIAL_SHORT only with a serial number). */
function adapter(devName: string, minor: number, port: string, serialNumber?: string, iface = '00'): Device {
  const model = {ID_MODEL_ID: '7523', ID_VENDOR_ID: '1a86'}
  return {
    devName,
    devNode: `/dev/${devName}`,
    devPath: `/devices/pci0000:00/0000:00:14.0/usb1/${port}/${port}:1.0/${devName}/tty/${devName}`,
    id: `c188:${minor}`,
    kernelName: devName,
    major: 188,
    minor,
    properties: {
      ...model,
      ID_PATH: `pci-0000:00:14.0-usb-0:${port}:1.0`,
      ID_SERIAL: serialNumber === undefined ? '1a86_USB_Serial' : `1a86_USB_Serial_${serialNumber}`,
      ...(serialNumber === undefined ? {} : {ID_SERIAL_SHORT: serialNumber}),
      ID_USB_INTERFACE_NUM: iface,
    },
    subsystem: 'tty',
    type: 'char',
  }
}

describe('deviceIdentity', function () {
  it('two identical serial-less adapters (udev sets ID_SERIAL to vendor_model) are two devices, told apart by port', function () {
    const [a, b] = [adapter('ttyUSB0', 0, '1-1'), adapter('ttyUSB1', 1, '1-2')]
    expect(a.properties.ID_SERIAL).to.equal(b.properties.ID_SERIAL)
    expect(deviceIdentity(a).kind).to.equal('port')
    expect(stableDeviceId(a)).to.not.equal(stableDeviceId(b))
  })

  it('follows a serial number across ports and kernel names; without one, the port whatever is plugged there', function () {
    expect(stableDeviceId(adapter('ttyUSB1', 1, '1-2', 'A10KXYZ'))).to.equal(stableDeviceId(adapter('ttyUSB0', 0, '1-1', 'A10KXYZ')))
    expect(stableDeviceId(adapter('ttyUSB0', 0, '1-1', 'A10KXYZ'))).to.not.equal(stableDeviceId(adapter('ttyUSB0', 0, '1-1', 'B20QQQ')))
    expect(deviceIdentity(adapter('ttyUSB0', 0, '1-1', 'A10KXYZ')).kind).to.equal('serial')
    // Serial-less at the same port, re-plugged under another kernel name: the same device.
    expect(stableDeviceId(adapter('ttyUSB3', 3, '1-1'))).to.equal(stableDeviceId(adapter('ttyUSB0', 0, '1-1')))
  })

  it('identity Port follows the port even when the device has a serial number', function () {
    const here = adapter('ttyUSB0', 0, '1-1', 'A10KXYZ')
    const other = adapter('ttyUSB1', 1, '1-1', 'B20QQQ')
    expect(stableDeviceId(here, 'Port')).to.equal(stableDeviceId(other, 'Port'))
    expect(stableDeviceId(here, 'Port')).to.not.equal(stableDeviceId(adapter('ttyUSB0', 0, '1-2', 'A10KXYZ'), 'Port'))
    expect(deviceIdentity(here, 'Port').kind).to.equal('port')
  })

  describe('identity SerialAndPort', function () {
    // A board reflashed through its own tty re-enumerates saying any vendor, model and serial: here another tenant's.
    const victim = adapter('ttyUSB0', 0, '1-1', 'A10KXYZ')
    const clone = adapter('ttyUSB1', 1, '1-2', 'A10KXYZ')

    it("a device that copies another's serial at another port is another device; under Serial it is the same", function () {
      expect(stableDeviceId(clone)).to.equal(stableDeviceId(victim))
      expect(stableDeviceId(clone, 'SerialAndPort')).to.not.equal(stableDeviceId(victim, 'SerialAndPort'))
      expect(deviceIdentity(victim, 'SerialAndPort')).to.deep.include({kind: 'serial and port', word: '1a86_USB_Serial_A10KXYZ'})
    })

    it('the same device plugged in again at its port under another kernel name is the same; another device at that port is not (unlike Port)', function () {
      expect(stableDeviceId(adapter('ttyUSB5', 5, '1-1', 'A10KXYZ'), 'SerialAndPort')).to.equal(stableDeviceId(victim, 'SerialAndPort'))
      const other = adapter('ttyUSB5', 5, '1-1', 'B20QQQ')
      expect(stableDeviceId(other, 'Port')).to.equal(stableDeviceId(victim, 'Port'))
      expect(stableDeviceId(other, 'SerialAndPort')).to.not.equal(stableDeviceId(victim, 'SerialAndPort'))
    })

    it('differs from Serial and Port for one device, so that the three never name each other', function () {
      const ids = new Set((['Serial', 'Port', 'SerialAndPort'] as const).map((follows) => stableDeviceId(victim, follows)))
      expect(ids.size).to.equal(3)
    })

    it('a device without a serial number is followed by its port, as under Serial and Port', function () {
      const serialless = adapter('ttyUSB0', 0, '1-1')
      expect(deviceIdentity(serialless, 'SerialAndPort').kind).to.equal('port')
      expect(stableDeviceId(serialless, 'SerialAndPort')).to.equal(stableDeviceId(serialless, 'Port'))
    })

    it('a device with a serial number and no port (no udev ID_PATH) is bound to its sysfs path', function () {
      const at = (minor: number): Device => loop(minor, {ID_SERIAL: 'Lab_Disk_S1', ID_SERIAL_SHORT: 'S1'})
      expect(deviceIdentity(at(1), 'SerialAndPort').kind).to.equal('serial and port')
      expect(stableDeviceId(at(1), 'SerialAndPort')).to.equal(stableDeviceId(at(1), 'SerialAndPort'))
      expect(stableDeviceId(at(2), 'SerialAndPort')).to.not.equal(stableDeviceId(at(1), 'SerialAndPort'))
      expect(stableDeviceId(at(2))).to.equal(stableDeviceId(at(1)))
    })
  })

  it('tells apart the nodes of one physical device: interfaces, a disk and its partitions, event and mouse nodes', function () {
    expect(stableDeviceId(adapter('ttyUSB0', 0, '1-1', 'Q', '00'))).to.not.equal(stableDeviceId(adapter('ttyUSB1', 1, '1-1', 'Q', '01')))
    const disk = {...loop(0, {ID_PATH: 'pci-0000:00:1f.2-ata-1', ID_SERIAL: 'SSD_S3Z9', ID_SERIAL_SHORT: 'S3Z9'}), devType: 'disk'}
    const part = (n: number): Device => ({...disk, devType: 'partition', kernelName: `sda${n}`, properties: {...disk.properties, PARTN: String(n)}})
    const ids = new Set([disk, part(1), part(2)].map((d) => stableDeviceId(d)))
    expect(ids.size).to.equal(3)
    const input = (name: string): Device => ({...adapter(name, 0, '1-1'), kernelName: name, subsystem: 'input'})
    expect(stableDeviceId(input('event3'))).to.not.equal(stableDeviceId(input('mouse0')))
    expect(stableDeviceId(input('event3'))).to.equal(stableDeviceId(input('event7')))
  })

  it("falls back to the sysfs path, and stays within kubelet's 63 characters as a CDI-valid name", function () {
    const byPath = stableDeviceId(loop(3, {ID_PATH: 'platform-loop3'}))
    const bySysfs = stableDeviceId(loop(3))
    expect(byPath).to.not.equal(bySysfs)
    expect(deviceIdentity(loop(3)).kind).to.equal('sysfs')
    expect(bySysfs).to.match(/^loop3-[0-9a-f]{12}$/)
    const long = stableDeviceId(adapter('ttyUSB0', 0, '1-1', `_${'x'.repeat(200)}`))
    expect(long.length).to.be.at.most(63)
    expect(long).to.match(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/)
  })
})
