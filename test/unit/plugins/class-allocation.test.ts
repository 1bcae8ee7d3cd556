import {expect} from 'chai'

import type {Device} from '../../../src/lib/devices/types.js'
import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import {envNameOf} from '../../../src/lib/devices/resource-names.js'
import {ClassAllocation, maxGoneDevices} from '../../../src/lib/plugins/class-allocation.js'
import {deviceClass} from '../../support/device-class.js'

/** A USB serial adapter with a serial number, as udev records it. */
function serial(devName: string, minor: number, serialNumber: string, iface = '00'): Device {
  return {
    devName,
    devNode: `/dev/${devName}`,
    devPath: `/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/${devName}/tty/${devName}`,
    id: `c188:${minor}`,
    kernelName: devName,
    major: 188,
    minor,
    properties: {ID_SERIAL: `FTDI_FT232R_${serialNumber}`, ID_SERIAL_SHORT: serialNumber, ID_USB_INTERFACE_NUM: iface},
    subsystem: 'tty',
    type: 'char',
  }
}

const ttys = [{subsystem: 'tty'}]

describe('ClassAllocation', function () {
  it('Class allocation: capacity slots, Healthy with or without devices, and a container gets every device present', function () {
    const allocation = new ClassAllocation(deviceClass('usb-serial', {capacity: 3, match: ttys}), false)
    expect(allocation.listAndWatch()).to.deep.equal([0, 1, 2].map((i) => ({health: 'Healthy', ID: `slot-${i}`})))
    expect(allocation.setDevices([serial('ttyUSB0', 0, 'A'), serial('ttyUSB1', 1, 'B')])).to.equal(false) // the slots did not change
    const answer = allocation.allocate(['slot-1'])
    expect(answer.devices).to.deep.equal([
      {container_path: '/dev/ttyUSB0', host_path: '/dev/ttyUSB0', permissions: 'rw'},
      {container_path: '/dev/ttyUSB1', host_path: '/dev/ttyUSB1', permissions: 'rw'},
    ])
    expect(answer.envs).to.deep.equal({NFDCTL_DEVICES_USB_SERIAL: '/dev/ttyUSB0,/dev/ttyUSB1'})
    expect(answer.annotations).to.deep.equal({'classes.devices.nfdctl.io/usb-serial': 'slot-1'})
    expect(answer.cdi_devices).to.deep.equal([])
    allocation.setDevices([])
    expect(allocation.allocate(['slot-0']).devices).to.deep.equal([]) // devices plugged in later come from the agent
  })

  it('Device allocation: one ID per device; a gone device stays Unhealthy until it returns; allocating it is refused', function () {
    const allocation = new ClassAllocation(deviceClass('usb-serial', {allocation: 'Device', match: ttys}), true)
    const a = serial('ttyUSB0', 0, 'A')
    const b = serial('ttyUSB1', 1, 'B')
    expect(allocation.setDevices([a, b])).to.equal(true)
    const [idA, idB] = [stableDeviceId(a), stableDeviceId(b)]
    expect(allocation.listAndWatch()).to.deep.equal(
      [
        {health: 'Healthy', ID: idA},
        {health: 'Healthy', ID: idB},
      ].sort((x, y) => x.ID.localeCompare(y.ID)),
    )
    expect(allocation.setDevices([a])).to.equal(true)
    expect(allocation.listAndWatch()).to.deep.include({health: 'Unhealthy', ID: idB})
    expect(() => allocation.allocate([idB])).to.throw(`device ${idB} of class usb-serial is not present on this node any more`)
    expect(allocation.setDevices([a])).to.equal(false)
    // Back under another kernel name: the same ID, Healthy again.
    expect(allocation.setDevices([a, serial('ttyUSB2', 2, 'B')])).to.equal(true)
    expect(allocation.listAndWatch().every((d) => d.health === 'Healthy')).to.equal(true)
    const answer = allocation.allocate([idB])
    expect(answer.devices).to.deep.equal([{container_path: '/dev/ttyUSB2', host_path: '/dev/ttyUSB2', permissions: 'rw'}])
    expect(answer.cdi_devices).to.deep.equal([{name: `devices.nfdctl.io/usb-serial=${idB}`}])
  })

  it('lists at most maxGoneDevices gone devices, the most recent ones: a stream of serials does not grow the list', function () {
    const allocation = new ClassAllocation(deviceClass('usb-serial', {allocation: 'Device', match: ttys}), false)
    const stream = Array.from({length: maxGoneDevices + 10}, (_, i) => serial('ttyUSB0', 0, `S${i}`))
    for (const device of stream) allocation.setDevices([device])
    allocation.setDevices([])
    const listed = allocation.listAndWatch()
    expect(listed).to.have.length(maxGoneDevices)
    expect(listed.every((d) => d.health === 'Unhealthy')).to.equal(true)
    expect(listed.map((d) => d.ID)).to.include(stableDeviceId(stream.at(-1)!))
    expect(listed.map((d) => d.ID)).to.not.include(stableDeviceId(stream[0]))
  })

  it('prefers the devices kubelet must include, then the others in ID order (numeric: slot-2 before slot-10)', function () {
    const allocation = new ClassAllocation(deviceClass('usb-serial', {capacity: 12, match: ttys}), false)
    const request = {
      container_requests: [
        {allocation_size: 2, available_deviceIDs: ['slot-10', 'slot-2', 'slot-3'], must_include_deviceIDs: []},
        {allocation_size: 2, available_deviceIDs: ['slot-10', 'slot-2', 'slot-3'], must_include_deviceIDs: ['slot-10']},
      ],
    }
    expect(allocation.preferredAllocation(request)).to.deep.equal([
      ['slot-2', 'slot-3'],
      ['slot-10', 'slot-2'],
    ])
  })

  it('names the variable after the class in shell-safe upper case', function () {
    expect(envNameOf('usb-serial.v2')).to.equal('NFDCTL_DEVICES_USB_SERIAL_V2')
  })
})
