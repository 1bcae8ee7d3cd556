import {expect} from 'chai'
import {mkdtemp, readdir, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {createNodeFeature, exists, nodeFeaturePath} from '../../harness/controlplane/seed.js'
import {claimPodManifest, claimTemplateManifest, limitPodManifest, SerialDisks} from '../../harness/devices/dra-agent.js'
import {BackedLoops, canUseLoopControl, keepReading, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {SharedLayout} from '../../harness/node/shared-layout.js'
import {kubectl, kubeletDirPatch, livePods, loadImage, nodeLayoutPatch, waitForReadyPods, writeOverlay, type ListedPod, type NodeImage} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {chartTools, deployDir, kustomize, type Tools} from '../support/chart.js'
import {nfdctlImage} from '../support/nfdctl-image.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {runEvery} from '../support/run-end.js'
import {type FurtherNode, startSecondNode, testNode} from '../support/test-node.js'

// Loop devices 700-709 belong to these tests: loop700 is node A's disk (plugged in again as loop702), loop701
// node B's. Both agents see every loop device of the machine; each node's udev database (below its own
// directory of the shared layout) gives only its node's disk the serial the class matches.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const driver = 'devices.nfdctl.io'
const system = 'nfdctl-system'
const consumers = 'wl-two-nodes'
const gcNamespace = 'node-feature-discovery'
const className = 'twowl'
const draClass = `${className}.${driver}`
const resource = `${driver}/${className}`
const agents = 'app.kubernetes.io/name=nfdctl-agent'
const collectors = 'app.kubernetes.io/name=nfdctl-gc'

interface Slice {
  spec: {devices?: Array<{name: string}>}
}
interface Claim {
  status?: {allocation?: {devices?: {results?: Array<{device: string; pool: string}>}}}
}
interface PodObject {
  spec: {nodeName?: string; containers: Array<{image: string}>}
  status?: {resourceClaimStatuses?: Array<{resourceClaimName?: string}>; extendedResourceClaimStatus?: {resourceClaimName: string}}
}

/** One of the two nodes: its harness node, its directory of the shared layout, its udev database and disk. */
interface Side {
  readonly label: 'a' | 'b'
  readonly env: NodeEnv
  readonly loop: number
  readonly disks: SerialDisks
  /** What the shared layout's state/ and udev/ are on this node. */
  readonly ownDir: string
}

describe('deploy/agent-dra and deploy/gc across two nodes: one DaemonSet of the built image serves both, and the collector reacts to a node that went away', function () {
  let second: FurtherNode | undefined
  let dir: string | undefined
  let loops: BackedLoops | undefined
  let tools: Tools
  let image: NodeImage
  let layout: SharedLayout
  let a: Side | undefined
  let b: Side
  const pods: string[] = []
  const overlays: string[] = []
  let firstAgents: ListedPod[] = []
  let claimer: RunningPod
  let byLimit: RunningPod

  const admin = (): NodeEnv['client'] => a!.env.client
  const devicesOf = async (node: string): Promise<string[]> =>
    (await admin().request<{items: Slice[]}>('GET', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${node},spec.driver=${driver}`}})).items
      .flatMap((s) => (s.spec.devices ?? []).map((d) => d.name))
      .sort()
  const pod = (name: string): Promise<PodObject> => admin().request<PodObject>('GET', `/api/v1/namespaces/${consumers}/pods/${name}`)
  const allocation = async (claimName: string | undefined): Promise<Array<[string, string]>> => {
    if (claimName === undefined) throw new Error('the pod names no claim')
    const claim = await admin().request<Claim>('GET', `${dra}/namespaces/${consumers}/resourceclaims/${claimName}`)
    return (claim.status?.allocation?.devices?.results ?? []).map((r) => [r.pool, r.device])
  }
  const readsDisk = async (side: Side, running: RunningPod, index = side.loop): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index} on node ${side.label}`, async () => (await readLoop(side.env.node, running.containerId, index)) === loopData(index), {
      intervalMs: 20,
      timeoutMs: 15_000,
    })
  }
  const apply = async (overlay: string): Promise<void> => {
    overlays.push(overlay)
    await kubectl(a!.env, 'apply', '-k', overlay)
  }
  /** Deletes a node's pods with no grace period: the API server forgets them without a kubelet's word. */
  const forgetPodsOf = async (node: string): Promise<void> => {
    const left = await admin().request<{items: Array<{metadata: {name: string; namespace: string}}>}>('GET', '/api/v1/pods', {query: {fieldSelector: `spec.nodeName=${node}`}})
    for (const p of left.items)
      await admin()
        .request('DELETE', `/api/v1/namespaces/${p.metadata.namespace}/pods/${p.metadata.name}`, {body: {gracePeriodSeconds: 0}})
        .catch(() => {})
  }

  before(async function () {
    this.timeout(15 * 60_000)
    const first = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    tools = await chartTools(this)
    image = await nfdctlImage(this)
    second = await startSecondNode(this)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-2wl-'))
    loops = new BackedLoops(dir)
    const own = {a: join(dir, 'a'), b: join(dir, 'b')}
    layout = await SharedLayout.create(join(dir, 'layout'), [
      {node: first.node, ownDir: own.a},
      {node: second.env.node, ownDir: own.b},
    ])
    a = {disks: new SerialDisks(join(own.a, 'udev', 'data'), 'nfdctl-2wl'), env: first, label: 'a', loop: 700, ownDir: own.a}
    b = {disks: new SerialDisks(join(own.b, 'udev', 'data'), 'nfdctl-2wl'), env: second.env, label: 'b', loop: 701, ownDir: own.b}
    // Each node's containerd gets the image, under the tag of the rolling update too.
    for (const side of [a, b]) await loadImage(side.env, image, [`${image.tag}-next`])
    await createNamespace(first, consumers)
    await admin().request('POST', classesPath, {
      body: {
        apiVersion: 'devices.nfdctl.io/v1alpha1',
        kind: 'DeviceClass',
        metadata: {name: className},
        spec: {allocation: 'DRA', match: [{devName: 'loop70[0-9]', properties: {ID_SERIAL: 'nfdctl-2wl-*'}, subsystem: 'block'}]},
      },
    })
    await admin().request('POST', `${dra}/namespaces/${consumers}/resourceclaimtemplates`, {body: claimTemplateManifest('one-disk', draClass)})
  })

  // What a failed step needs to be understood once the nodes are gone: where the pods are and why they wait.
  afterEach(async function () {
    if (this.currentTest?.state !== 'failed' || a === undefined) return
    this.timeout(60_000)
    const show = async (...args: string[]): Promise<string> => kubectl(a!.env, ...args).catch((error: unknown) => String(error))
    process.stderr.write(
      `${await show('get', 'pods', '-A', '-o', 'wide')}\n${await show('describe', 'pods', '-n', system)}\n${await show('logs', '-n', system, '-l', agents, '--tail=30', '--prefix')}\n`,
    )
  })

  after(async function () {
    this.timeout(5 * 60_000)
    const nodeB = second?.env.node.name
    await runEvery([
      async () => {
        if (a !== undefined) await deletePods(a.env, pods.splice(0))
      },
      async () => {
        // A stopped node B confirms no deletion: its Node goes (or the DaemonSet would place another pod there),
        // and its pods go at once, as `kubectl delete --force` takes them, before their namespaces are deleted.
        if (a === undefined || nodeB === undefined || second?.env.node.kubelet.pid !== undefined) return
        await admin()
          .request('DELETE', `/api/v1/nodes/${nodeB}`)
          .catch(() => {})
        await forgetPodsOf(nodeB)
      },
      ...overlays
        .splice(0)
        .reverse()
        .map((overlay) => async () => {
          await kubectl(a!.env, 'delete', '-k', overlay, '--ignore-not-found', '--wait=true', '--timeout=90s')
          await rm(overlay, {force: true, recursive: true})
        }),
      async () => {
        if (a === undefined) return
        await waitFor('no agent pods', async () => (await livePods(a!.env, system, agents)).length === 0, {timeoutMs: 90_000})
      },
      async () => {
        if (a === undefined) return
        // Whatever a failed step left: the cluster-scoped objects by name, so that no policy outlives the suite.
        await kubectl(
          a.env,
          'delete',
          ...['nfdctl-device-annotation-access', 'nfdctl-agent-own-node-status', 'nfdctl-agent-own-node-slices', 'nfdctl-agent-dra-device-classes', 'nfdctl-agent-own-node-claims'].flatMap((name) => [
            `validatingadmissionpolicy/${name}`,
            `validatingadmissionpolicybinding/${name}`,
          ]),
          ...['nfdctl-agent', 'nfdctl-agent-dra', 'nfdctl-gc'].flatMap((name) => [`clusterrole/${name}`, `clusterrolebinding/${name}`]),
          `deviceclasses.resource.k8s.io/${draClass}`,
          '--ignore-not-found',
        )
      },
      async () => {
        if (a !== undefined)
          await admin()
            .request('DELETE', `${classesPath}/${className}`)
            .catch(() => {})
      },
      // Neither node has an agent left to withdraw its slices.
      ...[a?.env.node.name, nodeB].map((node) => async () => {
        if (a !== undefined && node !== undefined) await admin().request('DELETE', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${node},spec.driver=${driver}`}})
      }),
      async () => {
        if (a !== undefined) await kubectl(a.env, 'delete', 'namespace', system, consumers, gcNamespace, '--ignore-not-found', '--wait=true', '--timeout=90s')
      },
      ...(loops?.plugged ?? []).map((index) => () => loops!.drop(index)),
      async () => second?.stop(),
      async () => {
        if (a !== undefined && nodeB !== undefined)
          await admin()
            .request('DELETE', `/api/v1/nodes/${nodeB}`)
            .catch(() => {})
      },
      async () => {
        if (dir !== undefined) await rm(dir, {force: true, recursive: true})
      },
    ])
  })

  it("kubectl apply -k deploy/agent-dra with one overlay for both nodes (the same layout paths on each): an agent pod on each node, both Ready, each publishing its own node's disk alone", async function () {
    this.timeout(5 * 60_000)
    for (const side of [a!, b]) {
      await side.disks.record(side.loop, side.label)
      await loops!.add(side.loop)
    }
    const [daemonSet] = (await kustomize(tools, join(deployDir, 'agent-dra'))).filter((m) => m.kind === 'DaemonSet')
    const overlay = await writeOverlay({component: 'agent-dra', image, jsonPatches: [kubeletDirPatch(daemonSet, layout.kubeletDir)], patches: [nodeLayoutPatch('nfdctl-agent', layout.layout)]})
    const applied = performance.now()
    await apply(overlay)
    // /readyz answers 200 only once kubelet has the DRA driver registered: each kubelet dialled the socket path
    // below the shared layout, and reached its own node's agent.
    firstAgents = await waitForReadyPods(a!.env, system, agents, 2, 180_000)
    const readyMs = performance.now() - applied
    expect(firstAgents.map((p) => p.spec.nodeName).sort()).to.deep.equal([a!.env.node.name, b.env.node.name].sort())

    for (const side of [a!, b]) {
      const node = side.env.node.name
      const listed = await waitFor(`node ${side.label}'s pool lists its disk`, async () => ((await devicesOf(node)).length > 0 ? devicesOf(node) : undefined), {timeoutMs: 30_000})
      expect(listed, `node ${side.label}'s pool`).to.deep.equal([side.disks.deviceOf(side.label)])
      // Its state went to its own node's directory through the same hostPath.
      expect(await readdir(join(side.ownDir, 'state', 'agent')), `node ${side.label}'s agent state`).to.not.be.empty
    }
    const made = await waitFor(`the resource.k8s.io DeviceClass ${draClass}`, () =>
      admin()
        .request<{spec: {extendedResourceName?: string}}>('GET', `${dra}/deviceclasses/${draClass}`)
        .catch(() => undefined),
    )
    expect(made.spec.extendedResourceName).to.equal(resource)
    process.stderr.write(`      deploy/agent-dra on two nodes: apply → both agent pods Ready ${readyMs.toFixed(0)} ms\n`)
  })

  it("a claim pod held to node A reads node A's disk; a pod asking by limit goes where the class's only free device is, node B, and reads node B's disk", async function () {
    this.timeout(3 * 60_000)
    pods.push(`${consumers}/claimer`)
    const claimed = performance.now()
    await admin().request('POST', `/api/v1/namespaces/${consumers}/pods`, {body: claimPodManifest('claimer', a!.env.node.name, {template: 'one-disk'})})
    claimer = await waitForPod(a!.env, `${consumers}/claimer`, 90_000)
    await readsDisk(a!, claimer)
    const claimMs = performance.now() - claimed
    expect(await allocation((await pod('claimer')).status?.resourceClaimStatuses?.[0]?.resourceClaimName)).to.deep.equal([[a!.env.node.name, a!.disks.deviceOf('a')]])

    pods.push(`${consumers}/by-limit`)
    const limited = performance.now()
    await admin().request('POST', `/api/v1/namespaces/${consumers}/pods`, {body: limitPodManifest('by-limit', resource)})
    byLimit = await waitForPod(b.env, `${consumers}/by-limit`, 90_000)
    const placed = await pod('by-limit')
    expect(placed.spec.nodeName).to.equal(b.env.node.name)
    await readsDisk(b, byLimit)
    const limitMs = performance.now() - limited
    expect(await allocation(placed.status?.extendedResourceClaimStatus?.resourceClaimName)).to.deep.equal([[b.env.node.name, b.disks.deviceOf('b')]])
    expect(await readLoop(b.env.node, byLimit.containerId, a!.loop), "node A's disk in the pod on node B").to.match(/^failed/)
    process.stderr.write(`      claim pod created → reading on node A ${claimMs.toFixed(0)} ms, limit pod created → reading on node B ${limitMs.toFixed(0)} ms\n`)
  })

  it('kubectl set image on the agent DaemonSet: both agent pods are replaced while each consumer pod reads its device without one failed read; then an unplug and re-plug on node A reaches its running pod', async function () {
    this.timeout(5 * 60_000)
    const reading = keepReading([
      {containerId: claimer.containerId, index: a!.loop, name: claimer.name, node: a!.env.node},
      {containerId: byLimit.containerId, index: b.loop, name: byLimit.name, node: b.env.node},
    ])
    const started = performance.now()
    await kubectl(a!.env, '-n', system, 'set', 'image', 'daemonset/nfdctl-agent', `agent=${image.name}:${image.tag}-next`)
    await kubectl(a!.env, '-n', system, 'rollout', 'status', 'daemonset/nfdctl-agent', '--timeout=240s')
    const updated = await waitForReadyPods(a!.env, system, agents, 2, 60_000)
    const rolloutMs = performance.now() - started
    const during = await reading.stop()
    expect(during.failures, 'reads that failed during the rolling update').to.deep.equal([])
    expect(during.reads).to.be.greaterThan(10)
    expect(updated.map((p) => p.spec.nodeName).sort()).to.deep.equal([a!.env.node.name, b.env.node.name].sort())
    const oldUids = firstAgents.map((p) => p.metadata.uid)
    for (const agent of updated) {
      expect(oldUids, `${agent.metadata.name} is a new pod`).to.not.include(agent.metadata.uid)
      const spec = await admin().request<PodObject>('GET', `/api/v1/namespaces/${system}/pods/${agent.metadata.name}`)
      expect(spec.spec.containers[0].image).to.equal(`${image.name}:${image.tag}-next`)
      expect(agent.status.containerStatuses?.[0].restartCount, `${agent.metadata.name} restarts`).to.equal(0)
    }

    // The new agent of node A follows the pod the old one prepared: node A's disk goes, and comes back under
    // another loop number into the same container. On node A, not B: the agent makes a re-plugged device's
    // node in a container whose rootfs it finds in the host's mount table (/proc/1/mountinfo), and node B's
    // containerd mounts its containers' rootfs in node B's own mount namespace, where no real node's does.
    await loops!.drop(a!.loop)
    await rm(join(a!.disks.udevDir, `b7:${a!.loop}`), {force: true})
    await waitFor('the read on node A fails after the unplug', async () => (await readLoop(a!.env.node, claimer.containerId, a!.loop)).startsWith('failed'), {intervalMs: 20, timeoutMs: 15_000})
    const replugged = 702
    await a!.disks.record(replugged, 'a')
    const plugged = performance.now()
    await loops!.add(replugged)
    await readsDisk(a!, claimer, replugged)
    const replugMs = performance.now() - plugged
    expect(await readLoop(b.env.node, byLimit.containerId, b.loop), 'node B').to.equal(loopData(b.loop))
    process.stderr.write(
      `      agent DaemonSet rolling update on two nodes: set image → both pods replaced and Ready ${rolloutMs.toFixed(0)} ms (${during.reads} reads, none failed); re-plug on node A → reading ${replugMs.toFixed(0)} ms\n`,
    )
  })

  // Last: it stops node B.
  it("deploy/gc held to node A collects node B's NodeFeature once node B's kubelet is stopped and its Node deleted, and keeps node A's", async function () {
    this.timeout(4 * 60_000)
    await createNamespace(a!.env, gcNamespace)
    for (const side of [a!, b]) await createNodeFeature(admin(), gcNamespace, `features-${side.label}`, side.env.node.name)
    // Held to node A: node B is the node it is to collect, and a collector there would stop with it.
    const onNodeA = {apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: 'nfdctl-gc'}, spec: {template: {spec: {nodeSelector: {'kubernetes.io/hostname': a!.env.node.name}}}}}
    await apply(await writeOverlay({component: 'gc', image, patches: [onNodeA]}))
    const running = await waitForReadyPods(a!.env, gcNamespace, collectors, 2, 120_000)
    expect(running.map((p) => p.spec.nodeName)).to.deep.equal([a!.env.node.name, a!.env.node.name])

    await second!.stop()
    const deleted = performance.now()
    await admin().request('DELETE', `/api/v1/nodes/${b.env.node.name}`)
    // The shipped grace period (30 s) passes first.
    await waitFor("node B's NodeFeature collected", async () => !(await exists(admin(), nodeFeaturePath(gcNamespace, 'features-b'))), {intervalMs: 500, timeoutMs: 120_000})
    const collectedMs = performance.now() - deleted
    expect(await exists(admin(), nodeFeaturePath(gcNamespace, 'features-a')), "node A's NodeFeature").to.equal(true)
    for (const collector of await livePods(a!.env, gcNamespace, collectors)) expect(collector.status.containerStatuses?.[0].restartCount, `${collector.metadata.name} restarts`).to.equal(0)
    process.stderr.write(`      deploy/gc on node A: node B's Node deleted → its NodeFeature collected ${(collectedMs / 1000).toFixed(1)} s (grace period 30 s)\n`)
  })
})
