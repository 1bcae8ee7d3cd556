import {expect} from 'chai'
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {HostMounts} from '../../src/lib/devices/host-mounts.js'
import {loopDevice} from '../../harness/devices/loop-device.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'

/** This file's loop devices (its own numbers: the kernel is shared). */
const loops = [820, 821] as const

const run = (command: string, ...args: string[]): string => {
  const result = spawnSync(command, args, {encoding: 'utf8'})
  if (result.status !== 0) expect.fail(`${command} ${args.join(' ')}: ${result.stderr || result.error?.message}`)
  return result.stdout
}

describe('storage members are host-critical: a btrfs RAID1 of two loop devices (the real kernel and mount table)', function () {
  this.timeout(60_000)
  const work = mkdtempSync(join(tmpdir(), 'nfdctl-btrfs-'))
  const mountPoint = join(work, 'mnt')
  const devices = loops.map((i) => loopDevice(i))
  const attached: number[] = []
  let uuid = ''
  let mounted = false
  let namespace: ChildProcess | undefined

  before(function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    for (const tool of ['losetup', 'blkid', 'mkfs.btrfs', 'btrfs', 'mount', 'umount', 'unshare']) {
      if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) missingPrerequisite(this, `${tool} is not installed (util-linux, btrfs-progs)`)
    }
    if (!existsSync('/sys/fs/btrfs')) missingPrerequisite(this, 'this kernel has no btrfs (/sys/fs/btrfs)')
    mkdirSync(mountPoint)
    for (const index of loops) {
      addLoopDevice(index)
      const image = join(work, `disk-${index}`)
      writeFileSync(image, '')
      run('truncate', '-s', '128M', image)
      run('losetup', `/dev/loop${index}`, image)
      attached.push(index)
    }
    run('mkfs.btrfs', '-q', '-f', '-d', 'raid1', '-m', 'raid1', ...loops.map((i) => `/dev/loop${i}`))
    uuid = run('blkid', '-p', '-s', 'UUID', '-o', 'value', `/dev/loop${loops[0]}`).trim()
  })

  afterEach(function () {
    if (mounted) spawnSync('umount', [mountPoint])
    mounted = false
  })

  after(function () {
    namespace?.kill('SIGKILL')
    // mkfs.btrfs registered the devices with the kernel: forgotten, so a later use of these numbers starts clean.
    if (attached.length > 0) spawnSync('btrfs', ['device', 'scan', '--forget', ...attached.map((i) => `/dev/loop${i}`)])
    for (const index of attached) spawnSync('losetup', ['-d', `/dev/loop${index}`])
    for (const index of loops) removeLoopDevice(index)
    rmSync(work, {force: true, recursive: true})
  })

  const reasons = (): Array<string | undefined> => {
    const mounts = new HostMounts({maxAgeMs: 0})
    return devices.map((d) => mounts.reasonFor(d))
  }

  it('neither disk is critical while the filesystem is not mounted', function () {
    expect(reasons()).to.deep.equal([undefined, undefined])
  })

  it("mounted on the node by its first disk, the second is critical too, named after the node's mount", function () {
    run('mount', '-o', `device=/dev/loop${loops[1]}`, `/dev/loop${loops[0]}`, mountPoint)
    mounted = true
    expect(reasons()).to.deep.equal([`/dev/loop${loops[0]} backs the node's mount ${mountPoint}`, `/dev/loop${loops[1]} is a member of the btrfs filesystem mounted at ${mountPoint}`])
    run('umount', mountPoint)
    mounted = false
    expect(reasons(), 'unmounted').to.deep.equal([undefined, undefined])
  })

  it("mounted in another mount namespace only (not in the node's table), both disks are critical all the same", async function () {
    const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-ec', `mount -o device=/dev/loop${loops[1]} /dev/loop${loops[0]} ${mountPoint}\necho ready\nexec sleep 3600`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    namespace = child
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve())
      child.once('exit', () => reject(new Error(`mounting in a mount namespace of its own failed: ${stderr.trim()}`)))
    })
    expect(readFileSync('/proc/1/mountinfo', 'utf8'), "not in the node's table").to.not.include(` ${mountPoint} `)
    const elsewhere = `is a member of the btrfs filesystem ${uuid}, mounted outside the node's mount table`
    expect(reasons()).to.deep.equal(devices.map((d) => `${d.devNode} ${elsewhere}`))

    // The namespace's last process gone, the kernel unmounts the filesystem: its disks are free again.
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
    namespace = undefined
    await waitFor('the filesystem gone from /sys/fs/btrfs', async () => !existsSync(join('/sys/fs/btrfs', uuid)), {timeoutMs: 10_000})
    expect(reasons()).to.deep.equal([undefined, undefined])
  })
})
