import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {nodeAgentArgs} from '../../harness/devices/dra-agent.js'
import {BackedLoops, canUseLoopControl, missingMountTool} from '../../harness/devices/loop-devices.js'
import {deletePods, runPod, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClassManifest} from '../support/device-class.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {testNode} from '../support/test-node.js'

// Loop devices 801-804 belong to these tests (host-mounts.test.ts takes 800, plugins-host-mounts.test.ts 805-809).
const index = 801
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const run = promisify(execFile)

interface LogLine {
  msg: string
  time: number
  class?: string
  state?: string
  device?: string
  reason?: string
}

describe('devices agent on a real node: a disk the node mounts while a container holds it is taken back, and given again once unmounted', function () {
  let env: NodeEnv
  let dir: string
  let loops: BackedLoops
  let agent: CliProcess | undefined
  let mountPoint: string | undefined
  const pods: string[] = []

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    const missing = missingMountTool()
    if (missing !== undefined) missingPrerequisite(this, missing)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-agent-mounts-'))
    loops = new BackedLoops(dir)
  })

  after(async function () {
    this.timeout(60_000)
    await agent?.stop('SIGTERM')
    await deletePods(env, pods.splice(0))
    if (mountPoint !== undefined) await run('umount', [mountPoint])
    for (const i of loops?.plugged ?? []) await loops.drop(i)
    await env?.client.request('DELETE', `${classesPath}/hostm`).catch(() => {})
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('the mount leaves the class (log line, status refused), the container loses the device node; the unmount gives it back', async function () {
    this.timeout(2 * 60_000)
    await env.client.request('POST', classesPath, {
      body: deviceClassManifest('hostm', {annotationAccess: {namespaceSelector: {}}, capacity: 1, match: [{devName: 'loop80[1-4]', subsystem: 'block'}]}),
    })
    await loops.addWithFileSystem(index)
    agent = new CliProcess(nodeAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state')}, ['--metrics-port', '0', '--batch-quiet', '100ms']))
    await agent.waitForLine<LogLine>('hostm registered', (l) => l.class === 'hostm' && l.state === 'registered', 20_000)
    pods.push('holds-loop')
    const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hostm'}, command: ['sleep', '3600'], name: 'holds-loop'})
    const present = async (): Promise<boolean> => !/No such file/.test(await env.node.execFailure(pod.containerId, ['ls', `/dev/loop${index}`]).catch(() => ''))
    await waitFor(`loop${index} in the container`, present, {intervalMs: 20, timeoutMs: 10_000})

    mountPoint = join(dir, 'mnt')
    await mkdir(mountPoint)
    const mountedAt = Date.now()
    const started = performance.now()
    await run('mount', [`/dev/loop${index}`, mountPoint])
    await waitFor(`loop${index} gone from the container`, async () => !(await present()), {intervalMs: 20, timeoutMs: 10_000})
    const takenMs = performance.now() - started
    const refused = await agent.waitForLine<LogLine>(
      'the refusal logged',
      (l) => l.reason === 'HostCritical' && l.device === `/dev/loop${index}` && l.msg.includes(`backs the node's mount ${mountPoint}`),
      10_000,
    )
    process.stderr.write(`      mount on the node → refused ${refused.value.time - mountedAt} ms, → gone from the container ${takenMs.toFixed(0)} ms\n`)
    expect(takenMs, 'mount → taken back (ms)').to.be.below(3000)
    await waitFor(
      'the class status lists the refusal',
      async () => {
        const status = await env.client.request<{status?: {nodes?: Array<{node: string; refused?: Array<{device?: string; devName?: string; reason: string}>}>}}>('GET', `${classesPath}/hostm`)
        return status.status?.nodes?.find((n) => n.node === env.node.name)?.refused?.some((r) => r.reason === 'HostCritical')
      },
      {timeoutMs: 10_000},
    )

    await run('umount', [mountPoint])
    mountPoint = undefined
    await waitFor(`loop${index} back in the container`, present, {intervalMs: 20, timeoutMs: 10_000})
  })
})
