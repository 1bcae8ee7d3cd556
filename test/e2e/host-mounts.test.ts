import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {ClassMembers} from '../../src/lib/devices/class-members.js'
import {hostCriticalRefusal} from '../../src/lib/devices/host-critical.js'
import {HostMounts} from '../../src/lib/devices/host-mounts.js'
import {SysfsScanner} from '../../src/lib/devices/sysfs-scanner.js'
import {BackedLoops, canUseLoopControl, missingMountTool} from '../../harness/devices/loop-devices.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClass} from '../support/device-class.js'
import {missingPrerequisite} from '../support/prerequisites.js'

// Loop device 800 belongs to these tests (agent-host-mounts.test.ts takes 801-804, plugins-host-mounts.test.ts 805-809).
const index = 800

const run = promisify(execFile)

describe("HostMounts follows the node's mounts as they change (the real kernel's mount table, poll(2) on mountinfo)", function () {
  this.timeout(60_000)
  let work: string
  let mountPoint: string
  let loops: BackedLoops
  let mounts: HostMounts | undefined
  let mounted = false

  before(async function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    const missing = missingMountTool()
    if (missing !== undefined) missingPrerequisite(this, missing)
    work = await mkdtemp(join(tmpdir(), 'nfdctl-host-mounts-'))
    mountPoint = join(work, 'mnt')
    loops = new BackedLoops(work)
  })

  after(async function () {
    mounts?.stop()
    if (mounted) await run('umount', [mountPoint])
    for (const i of loops?.plugged ?? []) await loops.drop(i)
    if (work) await rm(work, {force: true, recursive: true})
  })

  it('a disk the node mounts after start leaves the class within a poll interval, naming the mount; unmounted, it is served again', async function () {
    await loops.addWithFileSystem(index)
    await mkdir(mountPoint)

    const changes: number[] = []
    const watchIntervalMs = 100
    mounts = new HostMounts({
      onChange: () => changes.push(performance.now()),
      onReadError: (what, error) => expect.fail(`cannot read ${what}: ${String(error)}`),
      watchIntervalMs,
    })
    const disks = deviceClass('disks', {allocation: 'Device', match: [{devName: `loop${index}`, subsystem: 'block'}]})
    const members = new ClassMembers(() => undefined, [disks], {refuse: (device, c) => hostCriticalRefusal(device, c, mounts!.reasonFor)})
    mounts.start()
    const device = await new SysfsScanner({}).scanOne('block', 7, index)
    if (device === undefined) expect.fail(`loop${index} is not in sysfs`)
    members.deviceEvent('add', device)
    expect(members.of('disks').map((d) => d.devName)).to.deep.equal([`loop${index}`])

    // Mounted on the node after start: no device event, no class change; only the mount table says so.
    const before = performance.now()
    await run('mount', [`/dev/loop${index}`, mountPoint])
    mounted = true
    await waitFor('the mount seen', async () => changes.length > 0, {intervalMs: 5, timeoutMs: 5_000})
    const seenMs = changes[0] - before
    expect([...members.hostChanged()]).to.deep.equal(['disks'])
    expect(members.of('disks')).to.deep.equal([])
    expect(members.refusals().map((r) => `${r.reason}: ${r.message}`)).to.deep.equal([
      `HostCritical: /dev/loop${index} backs the node's mount ${mountPoint}; set spec.hostCritical: Allow in the class to serve it`,
    ])
    // mount(8) returns after the mount: what is left is the wait for the next poll, and one reading of the tables.
    expect(seenMs, 'mount → onChange (ms)').to.be.below(watchIntervalMs + 400)

    await run('umount', [mountPoint])
    mounted = false
    await waitFor('the unmount seen', async () => changes.length > 1, {intervalMs: 5, timeoutMs: 5_000})
    expect([...members.hostChanged()]).to.deep.equal(['disks'])
    expect(members.of('disks').map((d) => d.devName)).to.deep.equal([`loop${index}`])
    process.stderr.write(`      mount → seen ${seenMs.toFixed(0)} ms (poll every ${watchIntervalMs} ms)\n`)

    // A mount elsewhere that leaves every block device as it was is no change.
    const count = changes.length
    await run('mount', ['-t', 'tmpfs', 'tmpfs', mountPoint])
    mounted = true
    await new Promise((resolve) => setTimeout(resolve, 3 * watchIntervalMs))
    expect(changes.length, 'a tmpfs mount changes no block device').to.equal(count)

    mounts.stop()
    mounts.stop()
  })
})
