import {expect} from 'chai'
import {closeSync, openSync, readdirSync, readlinkSync, writeSync} from 'node:fs'
import {setTimeout as sleep} from 'node:timers/promises'

import {DeviceWatcher} from '../../src/lib/devices/device-watcher.js'
import {SysfsScanner} from '../../src/lib/devices/sysfs-scanner.js'
import {sys} from '../../src/lib/sys/libc.js'
import {NetlinkUeventSocket} from '../../src/lib/sys/netlink-uevents.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'

/** This process's open descriptors and what they are (`socket:[…]`, `anon_inode:[eventfd]`, paths). */
function descriptors(): Map<number, string> {
  const open = new Map<number, string>()
  for (const name of readdirSync('/proc/self/fd')) {
    try {
      open.set(Number(name), readlinkSync(`/proc/self/fd/${name}`))
    } catch {
      // the descriptor readdir itself used, closed again
    }
  }
  return open
}

function opened(before: Map<number, string>): Map<number, string> {
  return new Map([...descriptors()].filter(([fd, link]) => before.get(fd) !== link))
}

/** CPU time (user + system, every thread of this process) spent over `ms` of doing nothing. */
/**
 * The process's CPU in the quietest of three windows of `ms`: a loop that spins uses CPU in every window,
 * while a garbage collection of the test run's heap (V8's memory reducer, 100+ ms late in a long run) lands
 * in one at most.
 */
async function idleCpuMs(ms: number): Promise<number> {
  const windows: number[] = []
  for (let i = 0; i < 3; i++) {
    const start = process.cpuUsage()
    await sleep(ms)
    const used = process.cpuUsage(start)
    windows.push((used.user + used.system) / 1000)
  }
  return Math.min(...windows)
}

describe('netlink uevent socket loop (real kernel): it cannot spin', function () {
  this.timeout(20_000)

  before(function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'writing to /sys uevent files needs root')
  })

  for (const victim of ['socket', 'wake eventfd'] as const) {
    it(`closing the ${victim} underneath a running watcher ends it with a clear error within 100 ms, no CPU is used afterwards, and reopen() brings the events back`, async () => {
      const before = descriptors()
      const errors: Array<{at: number; error: Error}> = []
      const logged: string[] = []
      const logger = {child: () => logger, debug: () => {}, error: (_f: object, m: string) => void logged.push(m), info: () => {}, warn: () => {}}
      const events: string[] = []
      const watcher = new DeviceWatcher({
        logger,
        onError: (error) => errors.push({at: performance.now(), error}),
        onEvent: ({action, device}) => events.push(`${action} ${device.devName}`),
        source: new SysfsScanner({}),
      })
      await watcher.start(new AbortController().signal)
      const mine = opened(before)
      const target = [...mine].find(([, link]) => (victim === 'socket' ? link.startsWith('socket:[') : link === 'anon_inode:[eventfd]'))
      expect(target, `the watcher's ${victim} among ${JSON.stringify([...mine])}`).to.not.equal(undefined)
      // Opened first, so it cannot take the number about to be closed; its uevent then wakes the poll.
      const uevent = openSync('/sys/devices/virtual/mem/null/uevent', 'w')
      try {
        sys.close(target![0])
        const closedAt = performance.now()
        writeSync(uevent, 'change')
        const failure = await waitFor("the watcher's error", async () => errors[0], {intervalMs: 2, timeoutMs: 2000})
        expect(failure.at - closedAt, 'ms from the close to the error').to.be.lessThan(100)
        expect(failure.error.message).to.equal(`netlink uevent socket: poll reports its ${victim === 'socket' ? 'descriptor' : 'wake eventfd'} closed underneath (POLLNVAL); no more uevents`)
        // The owner (onError) says what it does about it, so the watcher says nothing.
        expect(logged).to.deep.equal([])
        const cpuMs = await idleCpuMs(300)
        expect(cpuMs, 'CPU ms used in the quietest 300 ms after the error').to.be.lessThan(30)
        expect(errors).to.have.length(1)
        events.length = 0
        await watcher.reopen()
        for (const entry of opened(before)) mine.set(...entry)
        writeSync(uevent, 'change')
        await waitFor('the change event on the new socket', async () => events.includes('change null'), {timeoutMs: 2000})
      } finally {
        closeSync(uevent)
      }
      await watcher.stop()
      await watcher.stop()
      const left = [...mine].filter(([fd, link]) => descriptors().get(fd) === link)
      expect(left, 'descriptors left open').to.deep.equal([])
    })
  }

  it('an idle socket uses no CPU while it waits, and stop() ends it at once', async () => {
    const socket = new NetlinkUeventSocket({
      onDatagram: () => {},
      onError: (e) => {
        throw e
      },
      onOverflow: () => {},
    })
    await socket.start()
    try {
      expect(await idleCpuMs(300)).to.be.lessThan(30)
      const t0 = performance.now()
      await socket.stop()
      expect(performance.now() - t0).to.be.lessThan(100)
    } finally {
      await socket.stop() // a failed assertion must not leave the loop holding the test run open
    }
  })

  it('start() reports failure through its promise (a second start rejects; it does not throw)', async () => {
    const socket = new NetlinkUeventSocket({onDatagram: () => {}, onError: () => {}, onOverflow: () => {}})
    await socket.start()
    try {
      let second: Promise<void> | undefined
      expect(() => {
        second = socket.start()
      }).to.not.throw()
      const error = await second!.then(
        () => undefined,
        (e: unknown) => e as Error,
      )
      expect(error?.message).to.equal('uevent socket already started')
    } finally {
      await socket.stop()
    }
  })
})
