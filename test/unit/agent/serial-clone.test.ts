import {expect} from 'chai'

import {wantedAccess, type RequestedVia} from '../../../src/lib/agent/container-access.js'
import {stableDeviceId, type IdentitySource} from '../../../src/lib/devices/device-identity.js'
import {servedMembers} from '../../../src/lib/devices/member-refusals.js'
import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {deviceClass} from '../../support/device-class.js'

/**
 * A tenant's board that re-enumerates saying another tenant's vendor, model and serial (a CDC-ACM board
 * reflashed through its own tty), at its own port: from the class's members to what a container is given.
 */
const board = (minor: number, port: string): Device => ({
  devName: `ttyACM${minor}`,
  devNode: `/dev/ttyACM${minor}`,
  devPath: `/devices/pci0000:00/0000:00:14.0/usb1/${port}/${port}:1.0/tty/ttyACM${minor}`,
  id: `c166:${minor}`,
  kernelName: `ttyACM${minor}`,
  major: 166,
  minor,
  properties: {ID_MODEL_ID: '000a', ID_PATH: `pci-0000:00:14.0-usb-0:${port}:1.0`, ID_SERIAL: 'Lab_Board_E6614C30', ID_SERIAL_SHORT: 'E6614C30', ID_USB_INTERFACE_NUM: '00', ID_VENDOR_ID: '2e8a'},
  subsystem: 'tty',
  type: 'char',
})
const victim = board(0, '1-1')
const clone = board(1, '1-2')

/** What the class serves of these devices, as the device plugin, the slice and the agent see it. */
const served = (boards: DeviceClass, devices: readonly Device[]): Device[] => servedMembers([boards], new Map([['boards', new Map(devices.map((d) => [d.id, d]))]])).served.get('boards') ?? []

/** The devices the victim's container is given: it was allocated the victim's stable ID (by kubelet, or its claim). */
const victimGets = (boards: DeviceClass, members: readonly Device[], via: RequestedVia): string[] => [
  ...wantedAccess({
    allocated: new Map([['boards', [stableDeviceId(victim, boards.spec.identity)]]]),
    classes: new Map([['boards', boards]]),
    members: new Map([['boards', members]]),
    request: {classes: new Map([['boards', via]]), container: 'main', namespace: 'victim', pod: 'p', podUid: 'u'},
  }).keys(),
]

describe("a board that clones another tenant's serial number", function () {
  for (const [allocation, via] of [
    ['Device', 'limit'],
    ['DRA', 'claim'],
  ] as const) {
    const cls = (identity: IdentitySource): DeviceClass => deviceClass('boards', {allocation, identity})

    it(`identity Serial (allocation ${allocation}): refuses the victim while both are present, and takes its place in the victim's container once it is gone`, function () {
      const boards = cls('Serial')
      expect(served(boards, [victim, clone])).to.deep.equal([])
      expect(victimGets(boards, served(boards, [clone]), via)).to.deep.equal([clone.id])
    })

    it(`identity SerialAndPort (allocation ${allocation}): both are served apart while present; with the victim gone the clone never reaches its container, and the victim back at its port does`, function () {
      const boards = cls('SerialAndPort')
      expect(served(boards, [victim, clone]).map((d) => d.id)).to.deep.equal([victim.id, clone.id])
      expect(victimGets(boards, served(boards, [victim, clone]), via)).to.deep.equal([victim.id])
      expect(victimGets(boards, served(boards, [clone]), via)).to.deep.equal([])
      const back = board(2, '1-1')
      expect(victimGets(boards, served(boards, [clone, back]), via)).to.deep.equal([back.id])
    })
  }
})
