import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {randomUUID} from 'node:crypto'
import {fileURLToPath} from 'node:url'

import type {ListedDevice, WatchedDevice} from '../../src/cli/render-devices.js'
import {parseUevent, type Uevent} from '../../src/lib/devices/uevent.js'
import {NetlinkUeventSocket} from '../../src/lib/sys/netlink-uevents.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {installedCli} from '../support/installed-cli.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {nfdctl} from '../support/run-cli.js'

const dir = mkdtempSync(join(tmpdir(), 'nfdctl-devices-'))
chmodSync(dir, 0o755) // readable by nobody, for the unprivileged run
const classFile = join(dir, 'classes.yaml')
writeFileSync(
  classFile,
  `apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: test-loops}
spec:
  match:
  - {subsystem: block, devName: "loop2[0-9][0-9]"}
---
apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: null-device}
spec:
  match:
  - {subsystem: mem, devName: "null"}
  permissions: rw
`,
)

// Test-specific loop indexes: the kernel may be shared with other jobs.
const loopIndex = 200 + Math.floor(Math.random() * 50)

describe('devices list on this machine', function () {
  it('finds real devices with their major and minor numbers (/dev/null is 1:3)', async function () {
    const run = await nfdctl<ListedDevice[]>(['devices', 'list', '--all', '--json'])
    expect(run.exitCode, run.stderr).to.equal(0)
    const devices = run.result!
    expect(devices.find((d) => d.devNode === '/dev/null')).to.deep.include({classes: [], devName: 'null', major: 1, minor: 3, subsystem: 'mem', type: 'char'})
    expect(devices.find((d) => d.devNode === '/dev/zero')).to.deep.include({major: 1, minor: 5, type: 'char'})
    expect(devices.filter((d) => d.type === 'block').length).to.be.greaterThan(0)
  })

  it('shows only classified devices unless --all, with their classes', async function () {
    const run = await nfdctl<ListedDevice[]>(['devices', 'list', '--class-file', classFile, '--json'])
    expect(run.exitCode).to.equal(0)
    expect(run.result!.map((d) => [d.devNode, d.classes])).to.deep.include(['/dev/null', ['null-device']])
    expect(run.result!.every((d) => d.classes.length > 0)).to.equal(true)
    const table = await nfdctl(['devices', 'list', '--class-file', classFile])
    expect(table.stdout).to.match(/\/dev\/null\s+char\s+1:3\s+mem\s+null-device/)
  })

  it('good files of every shape load together', async function () {
    const fixture = (name: string): string => fileURLToPath(new URL(`../fixtures/classes/${name}`, import.meta.url))
    const run = await nfdctl<Array<{classes: string[]}>>(['devices', 'list', '--json', '--class-file', fixture('good.yaml'), '--class-file', fixture('good.json')])
    expect(run.exitCode, run.stdout).to.equal(0)
    expect(run.result).to.be.an('array')
  })
})

describe('kernel uevents (real netlink socket)', function () {
  before(function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'writing to /sys uevent files needs root')
  })

  it("receives a synthetic uevent written to a device's uevent file, with its variables", async function () {
    const events: Uevent[] = []
    const socket = new NetlinkUeventSocket({
      onDatagram: (d) => {
        const e = parseUevent(d)
        if (e) events.push(e)
      },
      onError: (e) => {
        throw e
      },
      onOverflow: () => {},
    })
    await socket.start()
    try {
      const uuid = randomUUID()
      writeFileSync('/sys/devices/virtual/mem/null/uevent', `change ${uuid} NFDCTLTEST=1 RUN=${uuid.slice(0, 8)}`)
      const event = await waitFor('the synthetic uevent', async () => events.find((e) => e.env.SYNTH_UUID === uuid), {timeoutMs: 5000})
      expect(event.action).to.equal('change')
      expect(event.devPath).to.equal('/devices/virtual/mem/null')
      expect(event.subsystem).to.equal('mem')
      expect(event.env).to.include({DEVNAME: 'null', MAJOR: '1', MINOR: '3', SYNTH_ARG_NFDCTLTEST: '1', SYNTH_ARG_RUN: uuid.slice(0, 8)})
    } finally {
      await socket.stop()
      await socket.stop()
    }
  })
})

describe('devices list --watch with real loop devices', function () {
  this.timeout(30_000)
  let watch: CliProcess | undefined

  before(function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
  })

  after(async () => {
    removeLoopDevice(loopIndex)
    await watch?.stop('SIGKILL')
  })

  it('streams the add and remove of a loop device with its class, and exits 0 on SIGINT', async function () {
    watch = new CliProcess(['devices', 'list', '--class-file', classFile, '--watch', '-o', 'json'])
    await watch.waitForLine<WatchedDevice>('the initial list', (d) => d.event === 'present' && d.devNode === '/dev/null', 20_000)

    addLoopDevice(loopIndex)
    const added = await watch.waitForLine<WatchedDevice>('the add event', (d) => d.event === 'add' && d.devName === `loop${loopIndex}`)
    expect(added.value).to.deep.include({classes: ['test-loops'], devNode: `/dev/loop${loopIndex}`, major: 7, minor: loopIndex, subsystem: 'block', type: 'block'})

    removeLoopDevice(loopIndex)
    const removed = await watch.waitForLine<WatchedDevice>('the remove event', (d) => d.event === 'remove' && d.devName === `loop${loopIndex}`)
    expect(removed.value.classes).to.deep.equal(['test-loops'])
    expect(removed.at).to.be.greaterThan(added.at)

    // Unclassified devices (the bdi entries, other loops) are not shown without --all.
    expect(watch.json<WatchedDevice>().every((d) => d.classes.length > 0)).to.equal(true)
    expect(await watch.stop('SIGINT')).to.equal(0)
  })

  it('works without root: nobody lists devices and hears a loop device being added', async function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'only root can drop to nobody for this check')
    this.timeout(120_000) // the first use builds the installed copy (installed-cli.ts)
    // nobody cannot read a private checkout (.ci/run clones into a mode-0700 directory): run an installed copy.
    const cli = await installedCli()
    const nobody = {gid: 65_534, uid: 65_534}
    watch = new CliProcess(['devices', 'list', '--class-file', classFile, '--watch', '-o', 'json'], cli.bin, nobody)
    await watch.waitForLine<WatchedDevice>('the initial list as nobody', (d) => d.event === 'present' && d.devNode === '/dev/null', 20_000)
    addLoopDevice(loopIndex)
    const added = await watch.waitForLine<WatchedDevice>('the add event as nobody', (d) => d.event === 'add' && d.devName === `loop${loopIndex}`)
    expect(added.value.classes).to.deep.equal(['test-loops'])
    removeLoopDevice(loopIndex)
    expect(await watch.stop('SIGINT')).to.equal(0)
  })
})

describe('devices list: a loop device the node mounts is host-critical (the real kernel and mount table)', function () {
  this.timeout(60_000)
  const index = 250 + Math.floor(Math.random() * 40)
  const work = mkdtempSync(join(tmpdir(), 'nfdctl-mounted-'))
  const mountPoint = join(work, 'mnt')
  let attached = false
  let mounted = false

  before(function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    for (const tool of ['losetup', 'mkfs.ext4', 'mount', 'umount']) {
      if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) missingPrerequisite(this, `${tool} is not installed (util-linux, e2fsprogs)`)
    }
  })

  after(function () {
    if (mounted) spawnSync('umount', [mountPoint])
    if (attached) spawnSync('losetup', ['-d', `/dev/loop${index}`])
    removeLoopDevice(index)
    rmSync(work, {force: true, recursive: true})
  })

  it('leaves it out of a class without hostCritical: Allow, naming the mount, and serves it in one with it; once unmounted, in both', async function () {
    const run = (command: string, ...args: string[]): void => {
      const result = spawnSync(command, args, {encoding: 'utf8'})
      if (result.status !== 0) expect.fail(`${command} ${args.join(' ')}: ${result.stderr}`)
    }
    addLoopDevice(index)
    const image = join(work, 'image')
    writeFileSync(image, Buffer.alloc(8 * 2 ** 20))
    run('losetup', `/dev/loop${index}`, image)
    attached = true
    run('mkfs.ext4', '-q', `/dev/loop${index}`)
    mkdirSync(mountPoint)
    run('mount', `/dev/loop${index}`, mountPoint)
    mounted = true
    const classes = join(work, 'classes.yaml')
    writeFileSync(
      classes,
      [
        {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'the-loop'}, spec: {match: [{devName: `loop${index}`, subsystem: 'block'}]}},
        {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'admin-loop'}, spec: {hostCritical: 'Allow', match: [{devName: `loop${index}`}]}},
      ]
        .map((c) => JSON.stringify(c))
        .join('\n---\n'),
    )
    const listed = async (): Promise<ListedDevice | undefined> => {
      const result = await nfdctl<ListedDevice[]>(['devices', 'list', '--class-file', classes, '--json'])
      expect(result.exitCode, result.stderr).to.equal(0)
      return result.result?.find((d) => d.devName === `loop${index}`)
    }
    const whileMounted = await listed()
    expect(whileMounted?.classes).to.deep.equal(['admin-loop'])
    expect(whileMounted?.refused).to.deep.equal({'the-loop': `/dev/loop${index} backs the node's mount ${mountPoint}; set spec.hostCritical: Allow in the class to serve it`})

    run('umount', mountPoint)
    mounted = false
    const unmounted = await listed()
    expect(unmounted?.classes).to.deep.equal(['the-loop', 'admin-loop'])
    expect(unmounted).to.not.have.property('refused')
  })
})
