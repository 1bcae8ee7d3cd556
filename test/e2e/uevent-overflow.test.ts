import {expect} from 'chai'
import {writeFileSync} from 'node:fs'

import {DeviceWatcher, type DeviceEvent} from '../../src/lib/devices/device-watcher.js'
import {SysfsScanner} from '../../src/lib/devices/sysfs-scanner.js'
import {NetlinkUeventSocket} from '../../src/lib/sys/netlink-uevents.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {firstLoop} from '../../harness/devices/loop-owners.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'

/** Real uevents faster than a tiny socket buffer can hold, while the event loop cannot drain it. */
function flood(count: number): void {
  for (let i = 0; i < count; i++) writeFileSync('/sys/devices/virtual/mem/null/uevent', 'change')
}

describe('uevent receive-buffer overflow (ENOBUFS, real kernel)', function () {
  this.timeout(20_000)

  before(function () {
    if (process.getuid?.() !== 0 || !canUseLoopControl()) missingPrerequisite(this, 'needs root to write uevent files and use /dev/loop-control')
  })

  it('reports the overflow instead of losing events silently', async function () {
    let overflows = 0
    let received = 0
    const socket = new NetlinkUeventSocket(
      {
        onDatagram: () => received++,
        onError: (e) => {
          throw e
        },
        onOverflow: () => overflows++,
      },
      1,
    ) // the kernel rounds this up to its minimum, a few KiB
    await socket.start()
    try {
      flood(500) // synchronous: nothing is read meanwhile
      await waitFor('an overflow report', async () => overflows > 0, {timeoutMs: 5000})
      expect(received, 'some events were dropped').to.be.lessThan(500)
    } finally {
      await socket.stop()
    }
  })

  it('rescans after an overflow, so a device added meanwhile is still reported', async function () {
    const index = firstLoop('test/e2e/uevent-overflow.test.ts') + Math.floor(Math.random() * 5)
    const events: DeviceEvent[] = []
    const warnings: string[] = []
    const logger = {child: () => logger, debug: () => {}, error: () => {}, info: () => {}, warn: (_f: object, m: string) => void warnings.push(m)}
    const watcher = new DeviceWatcher({logger, onEvent: (e) => events.push(e), receiveBufferBytes: 1, source: new SysfsScanner({})})
    const controller = new AbortController()
    await watcher.start(controller.signal)
    try {
      flood(500)
      addLoopDevice(index) // its own add uevent may well be among the dropped ones
      flood(500)
      await waitFor(`loop${index} reported`, async () => events.some((e) => e.action === 'add' && e.device.devName === `loop${index}`), {timeoutMs: 5000})
      await waitFor('the rescan', async () => warnings.some((w) => w.includes('rescanning all devices')), {timeoutMs: 5000})
      expect(watcher.devices.has(`b7:${index}`)).to.equal(true)
    } finally {
      removeLoopDevice(index)
      controller.abort()
      await watcher.stop()
      await watcher.stop()
    }
  })
})
