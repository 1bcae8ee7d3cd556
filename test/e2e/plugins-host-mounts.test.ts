import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {BackedLoops, canUseLoopControl, missingMountTool, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {allocatable, createPod, deletePods, podStatus, runPod, type NodeEnv} from '../../harness/node/pods.js'
import {kubectl, livePods, loadImage, nodeLayoutPatch, waitForReadyPods, writeOverlay, type NodeImage} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClassManifest} from '../support/device-class.js'
import {nfdctlImage} from '../support/nfdctl-image.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {runEvery} from '../support/run-end.js'
import {testNode} from '../support/test-node.js'

const system = 'nfdctl-system'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const resource = 'devices.nfdctl.io/wl-mounted'
const selector = 'app.kubernetes.io/name=nfdctl-plugins'
const run = promisify(execFile)
// Loop devices 805-809 belong to these tests (host-mounts.test.ts takes 800, agent-host-mounts.test.ts 801-804): the class takes loop805-809.

interface LogLine {
  msg: string
  time: number
  class?: string
  device?: string
  reason?: string
}

describe('deploy/plugins on the real node: a disk the node mounts is refused and reported, not served (the shipped DaemonSet, from the built image)', function () {
  let env: NodeEnv
  let dir: string
  let image: NodeImage
  let loops: BackedLoops
  const mounted: string[] = []
  const pods: string[] = []
  const overlays: string[] = []
  /** A loop device with a file system, mounted on the node (this process's mount namespace is the node's). */
  const mountOnNode = async (index: number): Promise<string> => {
    const point = join(dir, `mnt-${index}`)
    await mkdir(point, {recursive: true})
    await run('mount', [`/dev/loop${index}`, point])
    mounted.push(point)
    return point
  }
  const apply = async (patches: readonly object[] = []): Promise<void> => {
    const overlay = await writeOverlay({
      component: 'plugins',
      image: {name: image.name, tag: image.tag},
      patches: [nodeLayoutPatch('nfdctl-plugins', {containerdDir: '', dir, podResourcesDir: ''}), ...patches],
    })
    overlays.push(overlay)
    await kubectl(env, 'apply', '-k', overlay)
  }
  const logLines = async (pod: string, previous = false): Promise<LogLine[]> =>
    (await kubectl(env, '-n', system, 'logs', pod, ...(previous ? ['--previous'] : [])))
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine)

  before(async function () {
    this.timeout(15 * 60_000)
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    const missing = missingMountTool()
    if (missing !== undefined) missingPrerequisite(this, missing)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-plugins-mounts-'))
    await mkdir(join(dir, 'udev'), {recursive: true})
    loops = new BackedLoops(dir)
    image = await nfdctlImage(this)
    await loadImage(env, image)
  })

  afterEach(async function () {
    this.timeout(4 * 60_000)
    await runEvery([
      () => deletePods(env, pods.splice(0)),
      ...overlays
        .splice(0)
        .reverse()
        .map((overlay) => async () => {
          await kubectl(env, 'delete', '-k', overlay, '--ignore-not-found', '--wait=true', '--timeout=90s')
          await rm(overlay, {force: true, recursive: true})
        }),
      () => waitFor('no plugins pods', async () => (await livePods(env, system, selector)).length === 0, {timeoutMs: 90_000}),
      () => env.client.request('DELETE', `${classesPath}/wl-mounted`).catch(() => {}),
      ...mounted.splice(0).map((point) => () => run('umount', [point])),
      ...loops.plugged.map((index) => () => loops.drop(index)),
    ])
  })

  after(async function () {
    this.timeout(3 * 60_000)
    if (env === undefined) return
    await runEvery([
      () => kubectl(env, 'delete', 'clusterrole/nfdctl-plugins', 'clusterrolebinding/nfdctl-plugins', '--ignore-not-found'),
      () => kubectl(env, 'delete', 'namespace', system, '--ignore-not-found', '--wait=true', '--timeout=90s'),
      ...(loops?.plugged ?? []).map((index) => () => loops.drop(index)),
      async () => {
        if (dir) await rm(dir, {force: true, recursive: true})
      },
    ])
  })

  it('mounted before it starts and mounted while it serves: left out of the class, logged with the mount, counted; a pod asking for every device is refused by kubelet and one asking for one gets the free disk', async function () {
    this.timeout(6 * 60_000)
    await env.client.request('POST', classesPath, {body: deviceClassManifest('wl-mounted', {allocation: 'Device', match: [{devName: 'loop80[5-9]', subsystem: 'block'}]})})
    await loops.add(806)
    for (const index of [805, 807]) await loops.addWithFileSystem(index)
    const bootLike = await mountOnNode(807)

    await apply()
    const [plugins] = await waitForReadyPods(env, system, selector, 1)
    await waitFor(`allocatable ${resource}=2 (loop807 is the node's)`, async () => (await allocatable(env, resource)) === 2, {timeoutMs: 30_000})
    const refusedLine = (index: number, point: string) => (l: LogLine) =>
      l.reason === 'HostCritical' && l.device === `/dev/loop${index}` && l.msg.includes(`backs the node's mount ${point}`) && l.class === 'wl-mounted'
    expect((await logLines(plugins.metadata.name)).some(refusedLine(807, bootLike)), 'the refusal of loop807 is logged').to.equal(true)

    // Mounted on the node while served: withdrawn from kubelet's list without any device event or class change.
    const started = performance.now()
    const mountedAt = Date.now()
    const data = await mountOnNode(805)
    await waitFor(`allocatable ${resource}=1 after the mount`, async () => (await allocatable(env, resource)) === 1, {intervalMs: 20, timeoutMs: 10_000})
    const withdrawnMs = performance.now() - started
    const refusal = await waitFor('the refusal of loop805 logged', async () => (await logLines(plugins.metadata.name)).find(refusedLine(805, data)), {timeoutMs: 10_000})
    // The plugin sends kubelet its new list as it logs the refusal; kubelet then updates the Node's allocatable.
    const refusedMs = refusal.time - mountedAt
    process.stderr.write(`      mount on the node → refused and sent to kubelet: ${refusedMs} ms; → allocatable lower: ${withdrawnMs.toFixed(0)} ms\n`)
    expect(refusedMs, 'mount → refused (ms)').to.be.below(1000)
    expect(withdrawnMs, 'mount → allocatable lower (ms)').to.be.below(3000)
    const metrics = await kubectl(env, 'get', '--raw', `/api/v1/namespaces/${system}/pods/${plugins.metadata.name}:8080/proxy/metrics`)
    expect(metrics).to.contain('nfdctl_plugin_refused_devices{class="wl-mounted",reason="HostCritical"} 2')

    // Asking for two, the pod is refused at admission; asking for one, it gets loop806 and neither node disk.
    pods.push('mounted-two', 'mounted-one')
    await createPod(env, {command: ['sleep', '3600'], limits: {[resource]: '2'}, name: 'mounted-two'})
    const refused = await waitFor('mounted-two refused by kubelet', async () => ((await podStatus(env, 'mounted-two')).phase === 'Failed' ? podStatus(env, 'mounted-two') : undefined), {
      timeoutMs: 30_000,
    })
    expect(`${refused.reason}: ${refused.message}`).to.match(/wl-mounted/)
    const one = await runPod(env, {command: ['sleep', '3600'], limits: {[resource]: '1'}, name: 'mounted-one'})
    expect(await readLoop(env.node, one.containerId, 806)).to.equal(loopData(806))
    for (const index of [805, 807]) expect(await env.node.execFailure(one.containerId, ['ls', `/dev/loop${index}`]), `loop${index} in the pod`).to.match(/No such file/)
    expect((await livePods(env, system, selector))[0].status.containerStatuses?.[0].restartCount).to.equal(0)
  })

  it('without hostPID (an operator patch taking it away): exits 1 with one line naming hostPID, and serves nothing', async function () {
    this.timeout(4 * 60_000)
    await env.client.request('POST', classesPath, {body: deviceClassManifest('wl-mounted', {allocation: 'Device', match: [{devName: 'loop80[5-9]', subsystem: 'block'}]})})
    await loops.add(808)
    await apply([{apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: {name: 'nfdctl-plugins'}, spec: {template: {spec: {hostPID: false}}}}])
    const pod = await waitFor(
      'the plugins pod exited 1',
      async () => {
        const [p] = await livePods(env, system, selector)
        const status = p?.status.containerStatuses?.[0] as {lastState?: {terminated?: {exitCode: number}}; state?: {terminated?: {exitCode: number}}} | undefined
        const exit = status?.lastState?.terminated?.exitCode ?? status?.state?.terminated?.exitCode
        return exit === undefined ? undefined : {exit, name: p.metadata.name}
      },
      {intervalMs: 250, timeoutMs: 90_000},
    )
    expect(pod.exit).to.equal(1)
    const output = await kubectl(env, '-n', system, 'logs', pod.name, '--previous').catch(() => kubectl(env, '-n', system, 'logs', pod.name))
    const lines = output
      .trim()
      .split('\n')
      .filter((l) => l.includes('hostPID'))
    expect(lines, output).to.have.length(1)
    expect(lines[0]).to.contain("kubelet runs in another PID namespace, so /proc/1/mountinfo is not the node's mount table")
    expect(lines[0]).to.contain('hostPID: true in the pod spec')
    expect(await allocatable(env, resource), 'nothing registered').to.equal(0)
  })
})
