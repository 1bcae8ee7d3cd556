import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {CliProcess} from '../support/cli-process.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../support/loop-devices.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {allocatable, deletePods, runPod, testNode, type NodeEnv} from '../support/test-node.js'
import {waitFor} from '../support/wait.js'

const run = promisify(execFile)

// Loop devices 390-399 belong to these tests.
const classes = `apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: hotc}
spec:
  match: [{subsystem: block, devName: "loop39[0-9]"}]
  allocation: Class
  capacity: 3
`

interface LogLine {
  msg: string
  class?: string
  state?: string
  granted?: string[]
  revoked?: string[]
  pod?: string
}

describe('devices agent on a real node: devices follow containers', function () {
  let env: NodeEnv
  let dir: string
  let agent: CliProcess | undefined
  const loops = new Set<number>()
  const pods: string[] = []

  const addLoop = async (index: number): Promise<void> => {
    addLoopDevice(index)
    loops.add(index)
    await writeFile(join(dir, `backing-${index}`), `loop-${index}-data`.padEnd(4096, '.'))
    await run('losetup', [`/dev/loop${index}`, join(dir, `backing-${index}`)])
  }
  const dropLoop = async (index: number): Promise<void> => {
    await run('losetup', ['-d', `/dev/loop${index}`]).catch(() => {})
    removeLoopDevice(index)
    loops.delete(index)
  }
  const reads = async (containerId: string, index: number): Promise<string> => {
    try {
      return await env.node.exec(containerId, ['dd', `if=/dev/loop${index}`, 'bs=13', 'count=1', 'status=none'])
    } catch (error) {
      return `failed: ${(error as Error & {stderr?: string}).stderr ?? (error as Error).message}`
    }
  }

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-agent-'))
    await writeFile(join(dir, 'classes.yaml'), classes)
  })

  afterEach(async function () {
    this.timeout(60_000)
    await agent?.stop('SIGTERM')
    agent = undefined
    await deletePods(env, pods.splice(0))
    for (const i of [...loops]) await dropLoop(i)
  })

  after(async function () {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('hot-plugs a device into running containers (by limit and by annotation), takes it away on unplug, and leaves access in place on SIGTERM', async function () {
    await addLoop(390)
    agent = new CliProcess([
      'devices', 'agent', '--kubeconfig', env.plane.kubeconfig, '--node-name', env.node.name, '--class-file', join(dir, 'classes.yaml'),
      '--containerd-address', env.node.containerd.socket, '--pod-resources-socket', env.node.kubelet.podResourcesSocket,
      '--metrics-port', '0', '--log-format', 'json', '--batch-quiet', '100ms',
    ])
    await agent.waitForLine<LogLine>('hotc registered', (l) => l.class === 'hotc' && l.state === 'registered', 20_000)
    await waitFor('allocatable hotc=3', async () => (await allocatable(env, 'devices.nfdctl.io/hotc')) === 3, {timeoutMs: 15_000})

    pods.push('agent-limit', 'agent-annotation')
    const byLimit = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/hotc': '1'}, name: 'agent-limit'})
    const byAnnotation = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-annotation'})
    expect(await reads(byLimit.containerId, 390)).to.equal('loop-390-data') // from kubelet's Allocate
    // The annotated pod has no allocation: the agent gives it the device after it starts.
    await waitFor('the annotated pod reads loop390', async () => (await reads(byAnnotation.containerId, 390)) === 'loop-390-data', {timeoutMs: 10_000})

    // Plugged in after both started: both get it, within the batch window.
    const plugged = performance.now()
    await addLoop(391)
    for (const pod of [byLimit, byAnnotation]) {
      await waitFor(`${pod.name} reads the new loop391`, async () => (await reads(pod.containerId, 391)) === 'loop-391-data', {intervalMs: 20, timeoutMs: 10_000})
    }
    const hotPlugMs = performance.now() - plugged
    expect(hotPlugMs, 'uevent → both containers can read the new device (ms)').to.be.below(3000)

    // Unplugged: the rule and the node go from both. (Looked at with ls, not opened: opening a loop node that
    // no longer has a device makes the kernel create the device again.)
    await dropLoop(391)
    for (const pod of [byLimit, byAnnotation]) {
      await waitFor(`loop391 gone from ${pod.name}`, async () => {
        try {
          await env.node.exec(pod.containerId, ['ls', '/dev/loop391'])
          return false
        } catch (error) {
          return /No such file/.test((error as Error & {stderr?: string}).stderr ?? '')
        }
      }, {timeoutMs: 10_000})
    }
    expect(agent.json<LogLine>().some((l) => l.msg === 'devices updated' && l.revoked?.includes('/dev/loop391'))).to.equal(true)

    // SIGTERM: the agent stops, exit 0, and the containers keep what they were given.
    expect(await agent.stop('SIGTERM')).to.equal(0)
    agent = undefined
    expect(await reads(byLimit.containerId, 390)).to.equal('loop-390-data')
    expect(await reads(byAnnotation.containerId, 390)).to.equal('loop-390-data')
  })
})
