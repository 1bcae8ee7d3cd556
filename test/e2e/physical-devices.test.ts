import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {promisify} from 'node:util'

import type {IdentitySource} from '../../src/lib/devices/device-identity.js'
import {nodeAgentArgs} from '../../harness/devices/dra-agent.js'
import {addLoopDevice, BackedLoops, canUseLoopControl, loopData, readLoop, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {allocatable, deletePods, runPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClassManifest} from '../support/device-class.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {testNode} from '../support/test-node.js'

// Loop devices 840-849 belong to these tests: the partitioned disk 840 (its partitions loop840p1, loop840p2),
// the boards 841-843 (identity SerialAndPort) and 844-845 (identity Serial).
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const run = promisify(execFile)

interface LogLine {
  msg: string
  class?: string
  state?: string
}
interface Refused {
  id: string
  devName: string
  reason: string
  message: string
}
interface NodeEntry {
  node: string
  refused?: Refused[]
}

/** A 4 MiB disk image with an MBR partition table of two 1 MiB Linux partitions, at sectors 2048 and 4096. */
function partitionedImage(): Buffer {
  const image = Buffer.alloc(4 * 2 ** 20)
  for (const [slot, start] of [2048, 4096].entries()) {
    const entry = 446 + 16 * slot
    image[entry + 4] = 0x83
    image.writeUInt32LE(start, entry + 8)
    image.writeUInt32LE(2048, entry + 12)
  }
  image.writeUInt16LE(0xaa_55, 510)
  return image
}

/** Writes what udev records for a board at loop<index>: the serial number it says, and where it is plugged in. */
type BoardRecord = (index: number, port: string) => Promise<void>

async function boardRecords(udevDir: string): Promise<BoardRecord> {
  await mkdir(udevDir, {recursive: true})
  return (index, port) => writeFile(join(udevDir, `b7:${index}`), `E:ID_VENDOR_ID=2e8a\nE:ID_MODEL_ID=000a\nE:ID_SERIAL=Lab_Board_E6614C30\nE:ID_SERIAL_SHORT=E6614C30\nE:ID_PATH=${port}\n`)
}

describe('devices agent on a real node: one holder per physical device, and an identity another device cannot take', function () {
  let env: NodeEnv
  let dir: string
  let loops: BackedLoops
  let agent: CliProcess | undefined
  const pods: string[] = []
  const classes: string[] = []

  const startAgent = async (udevDir: string, registered: readonly string[]): Promise<CliProcess> => {
    const cli = new CliProcess(nodeAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state')}, ['--metrics-port', '0', '--batch-quiet', '100ms', '--udev-data-dir', udevDir]))
    for (const name of registered) await cli.waitForLine<LogLine>(`${name} registered`, (l) => l.class === name && l.state === 'registered', 20_000)
    return cli
  }
  const createClass = async (name: string, spec: Record<string, unknown>): Promise<void> => {
    classes.push(name)
    await env.client.request('POST', classesPath, {body: deviceClassManifest(name, spec)})
  }
  const refusedIn = async (name: string): Promise<Refused[]> => {
    const status = (await env.client.request<{status?: {nodes?: NodeEntry[]}}>('GET', `${classesPath}/${name}`)).status
    return status?.nodes?.find((n) => n.node === env.node.name)?.refused ?? []
  }
  const cannotRead = async (containerId: string, index: number): Promise<boolean> => (await readLoop(env.node, containerId, index)).startsWith('failed: ')

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-physical-'))
    loops = new BackedLoops(dir)
  })

  afterEach(async function () {
    this.timeout(60_000)
    if (process.env.NFDCTL_DEBUG_AGENT && this.currentTest?.state === 'failed' && agent) console.log(agent.transcript())
    await agent?.stop('SIGTERM')
    agent = undefined
    await deletePods(env, pods.splice(0))
    for (const name of classes.splice(0)) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    for (const i of loops.plugged) await loops.drop(i)
  })

  after(async function () {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('a disk in a Device class and its partition in a Class class: served until losetup -P makes the partitions, then both refused, naming each other, and the partition reaches no container; partitions alone are served one holder each', async function () {
    this.timeout(120_000)
    const image = join(dir, 'partitioned')
    await writeFile(image, partitionedImage())
    addLoopDevice(840)
    try {
      await createClass('pdisk', {allocation: 'Device', match: [{devName: 'loop840', subsystem: 'block'}]})
      await createClass('ppart', {annotationAccess: {namespaceSelector: {}}, match: [{devName: 'loop840p1', subsystem: 'block'}]})
      agent = await startAgent(join(dir, 'no-udev'), ['pdisk', 'ppart'])
      await waitFor('allocatable pdisk=1', async () => (await allocatable(env, 'devices.nfdctl.io/pdisk')) === 1, {timeoutMs: 15_000})

      // The partitions appear as the kernel reads the table, or, on a kernel built without partition-table
      // parsers, as partx adds them (BLKPG): real uevents either way, each partition inside its disk in sysfs.
      await run('losetup', ['-P', '/dev/loop840', image])
      if (!existsSync('/sys/block/loop840/loop840p1')) await run('partx', ['-a', '/dev/loop840'])
      await waitFor('loop840p1 and loop840p2 in sysfs', async () => existsSync('/sys/block/loop840/loop840p1') && existsSync('/sys/block/loop840/loop840p2'))
      const [disk, part] = await waitFor('the disk and its partition refused', async () => {
        const both = await Promise.all(['pdisk', 'ppart'].map(refusedIn))
        return both.every((r) => r.length === 1) ? both.flat() : undefined
      })
      expect([disk.devName, disk.reason, part.devName, part.reason]).to.deep.equal(['loop840', 'ExclusiveOverlap', 'loop840p1', 'ExclusiveOverlap'])
      expect(disk.message).to.match(/^\/dev\/loop840 holds \/dev\/loop840p1 in class ppart \(allocation Class\); /)
      expect(part.message).to.match(/^\/dev\/loop840p1 is part of \/dev\/loop840 in class pdisk \(allocation Device\); /)
      await waitFor('allocatable pdisk=0', async () => (await allocatable(env, 'devices.nfdctl.io/pdisk')) === 0, {timeoutMs: 15_000})
      pods.push('partition-reader')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'ppart'}, command: ['sleep', '3600'], name: 'partition-reader'})
      await sleep(500) // batches have run since the pod started: still nothing
      expect(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop840p1'])).to.match(/No such file/)

      // The Device class takes the partitions instead of the disk: side by side, they are served, one unit each.
      await env.client.request('DELETE', `${classesPath}/ppart`)
      await env.client.request('PUT', `${classesPath}/pdisk`, {
        body: {...deviceClassManifest('pdisk', {allocation: 'Device', match: [{devName: 'loop840p[12]', subsystem: 'block'}]}), metadata: await metadataOf('pdisk')},
      })
      await waitFor('allocatable pdisk=2', async () => (await allocatable(env, 'devices.nfdctl.io/pdisk')) === 2, {timeoutMs: 15_000})
      await waitFor('nothing refused in pdisk', async () => (await refusedIn('pdisk')).length === 0, {timeoutMs: 5_000})
    } finally {
      await run('losetup', ['-d', '/dev/loop840']).catch(() => {})
      removeLoopDevice(840)
    }
  })

  it("identity SerialAndPort: a board that says another's serial at another port is served apart, never reaches the other's container after it is unplugged, and the original back at its port does", async function () {
    this.timeout(120_000)
    const {record, victim} = await victimHolding('boards', 'SerialAndPort', 'loop84[1-3]', 841)

    // The clone, at its own port: another device to the class, so both are served and neither is refused.
    await record(842, 'platform-hub-port-2')
    await loops.add(842)
    await waitFor('allocatable boards=2', async () => (await allocatable(env, 'devices.nfdctl.io/boards')) === 2, {timeoutMs: 15_000})
    expect(await refusedIn('boards')).to.deep.equal([])
    expect(await readLoop(env.node, victim.containerId, 841)).to.equal(loopData(841))

    // The victim's board unplugged: its container loses it and is not handed the clone.
    await loops.drop(841)
    await waitFor('the victim lost its board', () => cannotRead(victim.containerId, 841), {timeoutMs: 10_000})
    await sleep(1000) // batches have run since the unplug
    expect(await cannotRead(victim.containerId, 842)).to.equal(true)

    // The victim's board back at its port under another loop number: the same device, back in its container.
    await record(843, 'platform-hub-port-1')
    await loops.add(843)
    await waitFor('the board back in the victim', async () => (await readLoop(env.node, victim.containerId, 843)) === loopData(843), {timeoutMs: 10_000})
    expect(await cannotRead(victim.containerId, 842)).to.equal(true)
  })

  it("identity Serial (the default), for contrast: the clone at another port refuses the victim's board while both are present, and takes its place in the victim's running container once it is unplugged", async function () {
    this.timeout(120_000)
    const {record, victim} = await victimHolding('sboards', 'Serial', 'loop84[45]', 844)

    await record(845, 'platform-hub-port-2')
    await loops.add(845)
    const refused = await waitFor('both boards refused', async () => {
      const now = await refusedIn('sboards')
      return now.length === 2 ? now : undefined
    })
    expect(refused.map((r) => [r.devName, r.reason])).to.deep.equal([
      ['loop844', 'DuplicateIdentity'],
      ['loop845', 'DuplicateIdentity'],
    ])
    await waitFor('the victim lost its board while the clone is present', () => cannotRead(victim.containerId, 844), {timeoutMs: 10_000})

    await loops.drop(844)
    await waitFor("the clone in the victim's container", async () => (await readLoop(env.node, victim.containerId, 845)) === loopData(845), {timeoutMs: 10_000})
  })

  /**
   * A Device class of boards followed by `identity`, the victim's board at port 1 as loop<index>, the agent,
   * and the victim's pod holding the board by limit; `record` writes udev's record of another board.
   */
  const victimHolding = async (name: string, identity: IdentitySource, devName: string, index: number): Promise<{record: BoardRecord; victim: RunningPod}> => {
    const udevDir = join(dir, `udev-${name}`)
    const record = await boardRecords(udevDir)
    await createClass(name, {allocation: 'Device', identity, match: [{devName, subsystem: 'block'}]})
    await record(index, 'platform-hub-port-1')
    await loops.add(index)
    agent = await startAgent(udevDir, [name])
    await waitFor(`allocatable ${name}=1`, async () => (await allocatable(env, `devices.nfdctl.io/${name}`)) === 1, {timeoutMs: 15_000})
    pods.push(`${name}-victim`)
    const victim = await runPod(env, {command: ['sleep', '3600'], limits: {[`devices.nfdctl.io/${name}`]: '1'}, name: `${name}-victim`})
    expect(await readLoop(env.node, victim.containerId, index)).to.equal(loopData(index))
    return {record, victim}
  }

  const metadataOf = async (name: string): Promise<{name: string; resourceVersion: string}> => {
    const {metadata} = await env.client.request<{metadata: {name: string; resourceVersion: string}}>('GET', `${classesPath}/${name}`)
    return {name: metadata.name, resourceVersion: metadata.resourceVersion}
  }
})
