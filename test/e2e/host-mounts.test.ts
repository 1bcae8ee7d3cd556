import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {ClassMembers} from '../../src/lib/devices/class-members.js'
import {hostCriticalRefusal} from '../../src/lib/devices/host-critical.js'
import {HostMounts} from '../../src/lib/devices/host-mounts.js'
import {SysfsScanner} from '../../src/lib/devices/sysfs-scanner.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClass} from '../support/device-class.js'
import {missingPrerequisite} from '../support/prerequisites.js'

// Loop devices 800-804 belong to these tests (the shipped plugins DaemonSet's test takes 805-809).
const index = 800

const run = (command: string, ...args: string[]): void => {
  const result = spawnSync(command, args, {encoding: 'utf8'})
  if (result.status !== 0) expect.fail(`${command} ${args.join(' ')}: ${result.stderr}`)
}

describe("HostMounts follows the node's mounts as they change (the real kernel's mount table, poll(2) on mountinfo)", function () {
  this.timeout(60_000)
  const work = mkdtempSync(join(tmpdir(), 'nfdctl-host-mounts-'))
  const mountPoint = join(work, 'mnt')
  let mounts: HostMounts | undefined
  let attached = false
  let mounted = false

  before(function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    for (const tool of ['losetup', 'mkfs.ext4', 'mount', 'umount']) {
      if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) missingPrerequisite(this, `${tool} is not installed (util-linux, e2fsprogs)`)
    }
  })

  after(function () {
    mounts?.stop()
    if (mounted) spawnSync('umount', [mountPoint])
    if (attached) spawnSync('losetup', ['-d', `/dev/loop${index}`])
    removeLoopDevice(index)
    rmSync(work, {force: true, recursive: true})
  })

  it('a disk the node mounts after start leaves the class within a poll interval, naming the mount; unmounted, it is served again', async function () {
    addLoopDevice(index)
    const image = join(work, 'image')
    writeFileSync(image, Buffer.alloc(8 * 2 ** 20))
    run('losetup', `/dev/loop${index}`, image)
    attached = true
    run('mkfs.ext4', '-q', `/dev/loop${index}`)
    mkdirSync(mountPoint)

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
    run('mount', `/dev/loop${index}`, mountPoint)
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

    run('umount', mountPoint)
    mounted = false
    await waitFor('the unmount seen', async () => changes.length > 1, {intervalMs: 5, timeoutMs: 5_000})
    expect([...members.hostChanged()]).to.deep.equal(['disks'])
    expect(members.of('disks').map((d) => d.devName)).to.deep.equal([`loop${index}`])
    process.stderr.write(`      mount → seen ${seenMs.toFixed(0)} ms (poll every ${watchIntervalMs} ms)\n`)

    // A mount elsewhere that leaves every block device as it was is no change.
    const count = changes.length
    run('mount', '-t', 'tmpfs', 'tmpfs', mountPoint)
    mounted = true
    await new Promise((resolve) => setTimeout(resolve, 3 * watchIntervalMs))
    expect(changes.length, 'a tmpfs mount changes no block device').to.equal(count)

    mounts.stop()
    mounts.stop()
  })
})
