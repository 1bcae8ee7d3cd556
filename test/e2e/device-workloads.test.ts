import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {stringify} from 'yaml'

import {repoRoot} from '../../harness/controlplane/paths.js'
import {BackedLoops, canUseLoopControl, keepReading, readLoop} from '../../harness/devices/loop-devices.js'
import {allocatable, createNamespace, deletePods, runPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {
  containerIdOf,
  kubectl,
  livePods,
  loadImage,
  memoryPeak,
  type NodeLayout,
  nodeLayoutPatch,
  waitForReadyPods,
  writeOverlay,
  type ListedPod,
  type NodeImage,
} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {chartTools, helm as runHelm, type Tools} from '../support/chart.js'
import {deviceClassManifest} from '../support/device-class.js'
import {nfdctlImage} from '../support/nfdctl-image.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {runEvery} from '../support/run-end.js'
import {testNode} from '../support/test-node.js'

const system = 'nfdctl-system'
const consumers = 'wl-consumers'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
// Loop devices 440-449 belong to these tests.

describe('deploy/agent and deploy/plugins on the real node: the shipped DaemonSets, run from the built image', function () {
  let env: NodeEnv
  let dir: string
  let image: NodeImage
  let loops: BackedLoops
  const pods: string[] = []
  const overlays: string[] = []
  /** `kubectl apply -k` of an overlay over deploy/<component>; deleted with `kubectl delete -k` after the suite. */
  const apply = async (component: 'agent' | 'plugins', tag = image.tag): Promise<void> => {
    const overlay = await writeOverlay({component, image: {name: image.name, tag}, patches: [nodeLayoutPatch(`nfdctl-${component}`, layout())]})
    overlays.push(overlay)
    await kubectl(env, 'apply', '-k', overlay)
  }

  const expectReadable = async (holders: readonly RunningPod[], index: number, withinMs = 10_000): Promise<number[]> => {
    const started = performance.now()
    return Promise.all(
      holders.map(async (pod) => {
        await waitFor(`${pod.name} reads loop${index}`, async () => (await readLoop(env.node, pod.containerId, index)) === `loop-${index}-data`, {intervalMs: 20, timeoutMs: withinMs})
        return performance.now() - started
      }),
    )
  }
  /** Reads every holder's devices until stopped (keepReading): what failed meanwhile, nothing when access held. */
  const readAll = (holders: readonly RunningPod[], indexes: readonly number[]): ReturnType<typeof keepReading> =>
    keepReading(holders.flatMap((pod) => indexes.map((index) => ({containerId: pod.containerId, index, name: pod.name, node: env.node}))))
  /** The test node's paths (the agent's own directories below this suite's). */
  const layout = (): NodeLayout => ({containerdDir: join(env.node.containerd.options.dir, 'run'), dir, podResourcesDir: join(env.node.kubelet.rootDir, 'pod-resources')})
  const agentPods = async (): Promise<ListedPod[]> => livePods(env, system, 'app.kubernetes.io/name=nfdctl-agent')
  const helmNamespace = 'nfdctl-helm'
  let tools: Tools
  /** Helm (built with the control plane; its own cache and configuration) against the node's cluster. */
  const helm = async (...args: string[]): Promise<string> => {
    const result = await runHelm(tools, ['--kubeconfig', env.plane.kubeconfig, ...args])
    if (result.code !== 0) throw new Error(`helm ${args.join(' ')}: ${result.stderr.trim()}`)
    return result.stdout
  }

  before(async function () {
    this.timeout(15 * 60_000)
    env = await testNode(this)
    tools = await chartTools(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-workloads-'))
    loops = new BackedLoops(dir)
    for (const sub of ['state', 'cdi', 'udev']) await mkdir(join(dir, sub), {recursive: true})
    image = await nfdctlImage(this)
    await loadImage(env, image, [`${image.tag}-next`])
    await createNamespace(env, consumers, {'nfdctl-test/devices': 'allowed'})
  })

  afterEach(async function () {
    this.timeout(4 * 60_000)
    await runEvery([
      () => deletePods(env, pods.splice(0)),
      // Everything an overlay or the chart made, the cluster-scoped roles and admission policies too: the next
      // test, and the suites after this one, must meet a cluster without them.
      () => helm('uninstall', 'nfdctl', '-n', helmNamespace, '--ignore-not-found', '--wait', '--timeout', '2m'),
      ...overlays
        .splice(0)
        .reverse()
        .map((overlay) => async () => {
          await kubectl(env, 'delete', '-k', overlay, '--ignore-not-found', '--wait=true', '--timeout=90s')
          await rm(overlay, {force: true, recursive: true})
        }),
      () => waitFor('no nfdctl pods', async () => (await livePods(env, system, 'app.kubernetes.io/name in (nfdctl-agent,nfdctl-plugins)')).length === 0, {timeoutMs: 90_000}),
      ...['wl-loop', 'wl-unit', 'wl-helm'].map((name) => () => env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})),
      ...loops.plugged.map((index) => () => loops.drop(index)),
    ])
  })

  after(async function () {
    this.timeout(3 * 60_000)
    if (env === undefined) return
    // Whatever a failed step above left: the objects by name, so that no admission policy outlives the suite.
    await runEvery([
      () =>
        kubectl(
          env,
          'delete',
          'validatingadmissionpolicy/nfdctl-device-annotation-access',
          'validatingadmissionpolicybinding/nfdctl-device-annotation-access',
          'validatingadmissionpolicy/nfdctl-agent-own-node-status',
          'validatingadmissionpolicybinding/nfdctl-agent-own-node-status',
          'clusterrole/nfdctl-agent',
          'clusterrolebinding/nfdctl-agent',
          'clusterrole/nfdctl-plugins',
          'clusterrolebinding/nfdctl-plugins',
          '--ignore-not-found',
        ),
      () => kubectl(env, 'delete', 'namespace', system, consumers, helmNamespace, '--ignore-not-found', '--wait=true', '--timeout=90s'),
      ...(loops?.plugged ?? []).map((index) => () => loops.drop(index)),
      async () => {
        if (dir) await rm(dir, {force: true, recursive: true})
      },
    ])
  })

  it('devices agent DaemonSet: hot-plugs into a pod that asked by admitted annotation and one that asked by limit; a rolling update to a new image tag and kubectl delete pod keep every device usable throughout', async function () {
    this.timeout(8 * 60_000)
    await env.client.request('POST', classesPath, {
      body: deviceClassManifest('wl-loop', {
        annotationAccess: {namespaceSelector: {matchLabels: {'nfdctl-test/devices': 'allowed'}}},
        capacity: 2,
        match: [{devName: 'loop44[0-9]', subsystem: 'block'}],
      }),
    })
    await loops.add(440)
    await apply('agent')
    const [first] = await waitForReadyPods(env, system, 'app.kubernetes.io/name=nfdctl-agent', 1)
    await waitFor('allocatable wl-loop=2', async () => (await allocatable(env, 'devices.nfdctl.io/wl-loop')) === 2, {timeoutMs: 30_000})

    pods.push(`${consumers}/by-limit`, `${consumers}/by-annotation`)
    const byLimit = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/wl-loop': '1'}, name: 'by-limit', namespace: consumers})
    const byAnnotation = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'wl-loop'}, command: ['sleep', '3600'], name: 'by-annotation', namespace: consumers})
    const holders = [byLimit, byAnnotation]
    await expectReadable(holders, 440)

    // Plugged in after both started: the agent pod gives it to both.
    const hotPlugMs = await (async () => {
      const plugged = performance.now()
      await loops.add(441)
      await expectReadable(holders, 441)
      return performance.now() - plugged
    })()
    expect(hotPlugMs, 'plugged → readable in both containers (ms)').to.be.below(1000)

    // A rolling update to a new tag: the old agent pod stops (SIGTERM leaves access in place), the new one
    // takes over; the devices stay readable in both containers all the while.
    const reading = readAll(holders, [440, 441])
    await apply('agent', `${image.tag}-next`)
    await kubectl(env, '-n', system, 'rollout', 'status', 'daemonset/nfdctl-agent', '--timeout=120s')
    const [updated] = await waitForReadyPods(env, system, 'app.kubernetes.io/name=nfdctl-agent', 1)
    expect(updated.metadata.uid).to.not.equal(first.metadata.uid)
    const during = await reading.stop()
    expect(during.failures, 'reads that failed during the rolling update').to.deep.equal([])
    expect(during.reads).to.be.greaterThan(10)
    const spec = await env.client.request<{spec: {containers: Array<{image: string}>}}>('GET', `/api/v1/namespaces/${system}/pods/${updated.metadata.name}`)
    expect(spec.spec.containers[0].image).to.equal(`${image.name}:${image.tag}-next`)
    // The new agent pod hot-plugs as the old one did.
    await loops.add(442)
    await expectReadable(holders, 442)

    // kubectl delete pod: the DaemonSet makes another; nothing is lost meanwhile, and it hot-plugs again.
    const deleting = readAll(holders, [440, 441, 442])
    await kubectl(env, '-n', system, 'delete', 'pod', updated.metadata.name, '--wait=true')
    const [replaced] = await waitForReadyPods(env, system, 'app.kubernetes.io/name=nfdctl-agent', 1)
    expect(replaced.metadata.uid).to.not.equal(updated.metadata.uid)
    const deleted = await deleting.stop()
    expect(deleted.failures, 'reads that failed while the agent pod was replaced').to.deep.equal([])
    for (const index of [440, 441, 442]) for (const pod of holders) expect(await readLoop(env.node, pod.containerId, index), `${pod.name} loop${index}`).to.equal(`loop-${index}-data`)
    await loops.add(443)
    await expectReadable(holders, 443)
    // Unplugged: gone from both.
    await loops.drop(441)
    for (const pod of holders) {
      await waitFor(`loop441 gone from ${pod.name}`, async () => /No such file/.test(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop441']).catch(() => '')), {timeoutMs: 10_000})
    }

    // What the agent pod's memory came to (the limit is 192Mi): its memory cgroup's peak, as kubelet's limit sees it.
    const agent = (await agentPods())[0]
    const peak = await memoryPeak(containerIdOf(agent, 'agent'), env)
    process.stderr.write(`      agent pod: memory peak ${(peak / 2 ** 20).toFixed(1)} MiB (limit 192 MiB), hot-plug into two containers ${hotPlugMs.toFixed(0)} ms\n`)
    // The limit is twice the peak measured with 100 pods; a small node must stay within half of it.
    expect(peak, 'agent memory peak').to.be.below(96 * 2 ** 20)
    expect(agent.status.containerStatuses?.[0].restartCount).to.equal(0)
  })

  it('plugins serve DaemonSet: one kubelet device plugin per class; a hot-plugged device is allocatable, and a pod that asks by limit gets it at start', async function () {
    this.timeout(5 * 60_000)
    await env.client.request('POST', classesPath, {body: deviceClassManifest('wl-unit', {allocation: 'Device', match: [{devName: 'loop44[0-9]', subsystem: 'block'}]})})
    await loops.add(444)
    await apply('plugins')
    const [plugins] = await waitForReadyPods(env, system, 'app.kubernetes.io/name=nfdctl-plugins', 1)
    await waitFor('allocatable wl-unit=1', async () => (await allocatable(env, 'devices.nfdctl.io/wl-unit')) === 1, {timeoutMs: 30_000})
    await loops.add(445)
    await waitFor('allocatable wl-unit=2 after the hot-plug', async () => (await allocatable(env, 'devices.nfdctl.io/wl-unit')) === 2, {timeoutMs: 30_000})
    pods.push(`${consumers}/unit-a`, `${consumers}/unit-b`)
    const a = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/wl-unit': '1'}, name: 'unit-a', namespace: consumers})
    const b = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/wl-unit': '1'}, name: 'unit-b', namespace: consumers})
    // One device each, from kubelet's Allocate: together they hold both, neither holds the other's.
    const held = await Promise.all(
      [a, b].map(async (pod) => (await Promise.all([444, 445].map(async (i) => ((await readLoop(env.node, pod.containerId, i)) === `loop-${i}-data` ? i : 0)))).filter(Boolean)),
    )
    expect(held.map((h) => h.length)).to.deep.equal([1, 1])
    expect(held.flat().sort()).to.deep.equal([444, 445])
    const peak = await memoryPeak(containerIdOf((await livePods(env, system, 'app.kubernetes.io/name=nfdctl-plugins'))[0], 'plugins'), env)
    process.stderr.write(`      plugins pod: memory peak ${(peak / 2 ** 20).toFixed(1)} MiB (limit 192 MiB)\n`)
    expect(peak, 'plugins memory peak').to.be.below(96 * 2 ** 20)
    expect(plugins.status.containerStatuses?.[0].restartCount).to.equal(0)
  })

  it("helm install charts/nfdctl: the chart's agent, from the built image, hot-plugs a device into a pod that asked for a class the chart made", async function () {
    this.timeout(6 * 60_000)
    const values = {
      agent: {
        hostPaths: {
          cdiDir: join(dir, 'cdi'),
          containerdDir: layout().containerdDir,
          podResourcesDir: layout().podResourcesDir,
          stateDir: join(dir, 'state'),
          udevDir: join(dir, 'udev'),
        },
      },
      deviceClasses: [{name: 'wl-helm', spec: {annotationAccess: {namespaceSelector: {matchLabels: {'nfdctl-test/devices': 'allowed'}}}, match: [{devName: 'loop44[6-9]', subsystem: 'block'}]}}],
      gc: {enable: false},
      image: {repository: image.name, tag: image.tag},
    }
    const valuesFile = join(dir, 'values.yaml')
    await writeFile(valuesFile, stringify(values))
    await loops.add(446)
    await helm('install', 'nfdctl', join(repoRoot, 'charts/nfdctl'), '-n', helmNamespace, '--create-namespace', '-f', valuesFile, '--wait', '--timeout', '3m')
    await waitForReadyPods(env, helmNamespace, 'app.kubernetes.io/component=agent', 1)
    pods.push(`${consumers}/helm-annotation`)
    const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'wl-helm'}, command: ['sleep', '3600'], name: 'helm-annotation', namespace: consumers})
    await expectReadable([pod], 446)
    await loops.add(447)
    await expectReadable([pod], 447)
  })
})
