import {expect} from 'chai'
import {readFile, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {claimCdiFile} from '../../src/lib/dra/claim-cdi.js'
import {kubeletDraApi} from '../../src/lib/kubelet/dra-api.js'
import {unary} from '../../src/lib/grpc-unary.js'
import {claimPodManifest, claimTemplateManifest, draAgentArgs, type SerialDisks} from '../../harness/devices/dra-agent.js'
import {type BackedLoops, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {allocatable, createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {clusterGates} from '../support/kube-version.js'
import {serialDiskNode} from '../support/test-node.js'

// Loop devices 460-479 belong to these tests (the class takes loop460-469, and loop470 once edited; loop471 is a Device class's). Each test disk has a udev serial (in the agent's own udev
// database directory), so that plugged in again under another loop number it is the same device.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const draClass = 'dral.devices.nfdctl.io'

interface Slice {
  metadata: {name: string; uid: string}
  spec: {
    nodeName: string
    pool: {name: string; generation: number; resourceSliceCount: number}
    devices?: Array<{name: string; attributes: Record<string, {string?: string; int?: number; bool?: boolean}>; taints?: Array<{key: string; effect: string}>}>
  }
}
interface Claim {
  metadata: {name: string; uid: string}
  status?: {
    allocation?: {devices?: {results?: Array<{device: string; pool: string; driver: string}>}}
    devices?: Array<{device: string; conditions?: Array<{type: string; status: string; reason: string}>; data?: {devNode?: string}}>
  }
}
interface PodObject {
  metadata: {uid: string}
  status?: {
    conditions?: Array<{type: string; status: string; reason?: string; message?: string}>
    resourceClaimStatuses?: Array<{name: string; resourceClaimName?: string}>
    containerStatuses?: Array<{name: string; allocatedResourcesStatus?: Array<{name: string; resources?: Array<{resourceID: string; health?: string}>}>}>
  }
}
interface LogLine {
  msg: string
  claim?: string
}

describe('devices agent --dra on a real node: claims, CDI, and devices that come back', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let loops: BackedLoops
  let agent: CliProcess | undefined
  const namespace = 'nfdctl-dra'
  const pods: string[] = []

  let disks: SerialDisks
  const serialOf = (disk: string): string => disks.serialOf(disk)
  const deviceOf = (disk: string): string => disks.deviceOf(disk)
  /** The loop number each test disk is plugged in at now, by device name. */
  const pluggedAt = new Map<string, number>()
  const plug = async (index: number, disk: string): Promise<void> => {
    await disks.record(index, disk)
    await loops.add(index)
    pluggedAt.set(deviceOf(disk), index)
  }
  const unplug = async (index: number): Promise<void> => {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
  }

  const startAgent = async (): Promise<CliProcess> => {
    const cli = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir}))
    await cli.waitForLine<LogLine>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
    return cli
  }

  const slices = async (): Promise<Slice[]> =>
    (await env.client.request<{items: Slice[]}>('GET', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${env.node.name},spec.driver=devices.nfdctl.io`}})).items
  const slicedDevices = async (): Promise<string[]> => (await slices()).flatMap((s) => (s.spec.devices ?? []).map((d) => d.name)).sort()
  const waitForSlice = async (what: string, wanted: (names: string[]) => boolean): Promise<string[]> =>
    waitFor(
      what,
      async () => {
        const names = await slicedDevices()
        return wanted(names) ? names : undefined
      },
      {intervalMs: 50, timeoutMs: 10_000},
    )

  /**
   * Waits until the slice lists the disk with the unplugged taint (`unplugged`) or without it. Where the API
   * server drops device taints (DRADeviceTaints off: 1.34, 1.35), an unplugged device leaves the slice instead.
   */
  const waitForUnplugged = async (disk: string, unplugged: boolean): Promise<void> => {
    await waitFor(
      `disk ${disk} ${unplugged ? 'unplugged' : 'present'} in the slice`,
      async () => {
        const device = (await slices()).flatMap((s) => s.spec.devices ?? []).find((d) => d.name === deviceOf(disk))
        if (!clusterGates.deviceTaints) return (device === undefined) === unplugged
        return device !== undefined && (device.taints ?? []).some((t) => t.key === 'devices.nfdctl.io/unplugged' && t.effect === 'NoSchedule') === unplugged
      },
      {intervalMs: 50, timeoutMs: 10_000},
    )
  }
  /**
   * Waits until kubelet says the device's health in the pod's status; where ResourceHealthStatus is off (1.34,
   * 1.35) kubelet says none, which the claim's own status (readyCondition) stands in for.
   */
  const waitForHealth = async (name: string, device: string, wanted: 'Healthy' | 'Unhealthy'): Promise<void> => {
    if (clusterGates.resourceHealthStatus) {
      await waitFor(`pod allocatedResourcesStatus ${wanted}`, async () => (await health(name, device)) === wanted, {timeoutMs: 30_000})
    } else {
      expect(await health(name, device), 'no device health in the pod status without ResourceHealthStatus').to.equal(undefined)
    }
  }
  const createTemplate = async (name: string, request: Record<string, unknown>, ns = namespace): Promise<void> => {
    await env.client.request('POST', `${dra}/namespaces/${ns}/resourceclaimtemplates`, {body: claimTemplateManifest(name, draClass, request)})
  }
  const createClaimPod = async (name: string, template: string, ns = namespace): Promise<void> => {
    pods.push(`${ns}/${name}`)
    await env.client.request('POST', `/api/v1/namespaces/${ns}/pods`, {body: claimPodManifest(name, env.node.name, {template})})
  }
  const pod = (name: string, ns = namespace): Promise<PodObject> => env.client.request<PodObject>('GET', `/api/v1/namespaces/${ns}/pods/${name}`)
  const claimOf = async (name: string, ns = namespace): Promise<Claim> => {
    const claimName = (await pod(name, ns)).status?.resourceClaimStatuses?.[0]?.resourceClaimName
    if (claimName === undefined) throw new Error(`pod ${name} has no claim yet`)
    return env.client.request<Claim>('GET', `${dra}/namespaces/${ns}/resourceclaims/${claimName}`)
  }
  const readyCondition = async (name: string, device: string): Promise<{status: string; reason: string; devNode?: string} | undefined> => {
    const entry = (await claimOf(name)).status?.devices?.find((d) => d.device === device)
    const ready = entry?.conditions?.find((c) => c.type === 'Ready')
    return ready === undefined ? undefined : {devNode: entry?.data?.devNode, reason: ready.reason, status: ready.status}
  }
  const health = async (name: string, device: string): Promise<string | undefined> => {
    const statuses = (await pod(name)).status?.containerStatuses?.find((c) => c.name === 'main')?.allocatedResourcesStatus ?? []
    // The resource ID is the device's CDI ID (…/claim=<claim uid>-<device>).
    return statuses.flatMap((s) => s.resources ?? []).find((r) => r.resourceID.endsWith(`-${device}`))?.health
  }
  /** Waits until a pod runs and its container `main` reads the test disk at loop<index>. */
  const readsDisk = async (running: RunningPod, index: number): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index}`, async () => (await readLoop(env.node, running.containerId, index)) === loopData(index), {intervalMs: 20, timeoutMs: 10_000})
  }

  before(async function () {
    ;({dir, disks, env, loops, udevDir} = await serialDiskNode(this, 'nfdctl-dra'))
    await createNamespace(env, namespace)
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'dral'}, spec: {allocation: 'DRA', match: [{devName: 'loop46[0-9]', subsystem: 'block'}]}},
    })
    await createTemplate('one-disk', {})
    await createTemplate('two-disks', {allocationMode: 'ExactCount', count: 2})
    await plug(461, 'a')
    agent = await startAgent()
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && agent) console.log(agent.transcript())
    await agent?.stop('SIGTERM')
    await deletePods(env, pods.splice(0))
    for (const i of loops.plugged) await unplug(i)
    await env.client.request('DELETE', `${classesPath}/dral`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
    await rm(dir, {force: true, recursive: true})
  })

  it('publishes the node pool as a ResourceSlice and a resource.k8s.io DeviceClass that selects the class, owned by it', async function () {
    const names = await waitForSlice('the slice lists disk a', (n) => n.includes(deviceOf('a')))
    expect(names).to.deep.equal([deviceOf('a')])
    const [slice] = await slices()
    expect(slice.spec.pool).to.include({name: env.node.name, resourceSliceCount: 1})
    const attributes = slice.spec.devices![0].attributes
    expect(attributes['devices.nfdctl.io/kernelName']).to.deep.equal({string: 'loop461'})
    expect(attributes['devices.nfdctl.io/major']).to.deep.equal({int: 7})
    expect(attributes['devices.nfdctl.io/serial']).to.deep.equal({string: serialOf('a')})
    expect(attributes['devices.nfdctl.io/class_dral']).to.deep.equal({bool: true})
    const owner = await env.client.request<{metadata: {uid: string}}>('GET', `${classesPath}/dral`)
    const draDeviceClass = await waitFor('the resource.k8s.io DeviceClass', () =>
      env.client.request<{metadata: {ownerReferences?: Array<{uid: string}>}; spec: {selectors: Array<{cel: {expression: string}}>}}>('GET', `${dra}/deviceclasses/${draClass}`).catch(() => undefined),
    )
    expect(draDeviceClass.metadata.ownerReferences?.map((o) => o.uid)).to.deep.equal([owner.metadata.uid])
    expect(draDeviceClass.spec.selectors[0].cel.expression).to.include('class_dral')
  })

  it(`a hot-plug reaches the slice within 1 s, an unplug's ${clusterGates.deviceTaints ? 'taint' : 'removal (no device taints on this release)'} too`, async function () {
    let plugged = performance.now()
    await plug(462, 'b')
    await waitForSlice('disk b in the slice', (n) => n.includes(deviceOf('b')))
    expect(performance.now() - plugged).to.be.below(1000)
    plugged = performance.now()
    await unplug(462)
    await waitForUnplugged('b', true)
    expect(performance.now() - plugged).to.be.below(1000)
  })

  it('a pod with a ResourceClaimTemplate is scheduled, its claim allocated, and its container reads the device through CDI', async function () {
    this.timeout(120_000)
    await createClaimPod('reader', 'one-disk')
    const running = await waitForPod(env, `${namespace}/reader`, 60_000)
    const claim = await claimOf('reader')
    expect(claim.status?.allocation?.devices?.results?.map((r) => [r.driver, r.pool, r.device])).to.deep.equal([['devices.nfdctl.io', env.node.name, deviceOf('a')]])
    await readsDisk(running, 461)
    // The device came through CDI: kubelet handed containerd the claim's CDI device, and the spec file is ours.
    const spec = JSON.parse(await readFile(claimCdiFile(env.node.containerd.cdiDir, claim.metadata.uid), 'utf8')) as {devices: Array<{containerEdits: {deviceNodes: Array<{path: string}>}}>}
    expect(spec.devices.flatMap((d) => d.containerEdits.deviceNodes.map((n) => n.path))).to.deep.equal(['/dev/loop461', `/dev/nfdctl/claims/${claim.metadata.uid}/${deviceOf('a')}`])
    await waitFor('claim status Ready', async () => (await readyCondition('reader', deviceOf('a')))?.status === 'True', {timeoutMs: 10_000})
  })

  it("a pod asking for more devices than the node has stays Pending with the scheduler's reason", async function () {
    this.timeout(60_000)
    await createClaimPod('greedy', 'two-disks')
    const condition = await waitFor('greedy unschedulable', async () => (await pod('greedy')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {timeoutMs: 30_000})
    expect(condition.reason).to.equal('Unschedulable')
    expect(condition.message).to.match(/claim/i)
    await deletePods(env, [`${namespace}/greedy`])
    pods.splice(pods.indexOf(`${namespace}/greedy`), 1)
  })

  it(`unplug: access gone, the claim and the pod say so, the slice ${clusterGates.deviceTaints ? 'lists it tainted' : 'leaves it out'}; re-plug under another loop number: the same container reads it again`, async function () {
    this.timeout(120_000)
    const running = await waitForPod(env, `${namespace}/reader`)
    await readsDisk(running, 461)
    await unplug(461)
    await waitFor('read fails after unplug', async () => (await readLoop(env.node, running.containerId, 461)).startsWith('failed'), {intervalMs: 20})
    await waitForUnplugged('a', true)
    expect(await waitFor('claim status not Ready', async () => readyCondition('reader', deviceOf('a')).then((c) => (c?.status === 'False' ? c : undefined)))).to.include({reason: 'DeviceUnplugged'})
    await waitForHealth('reader', deviceOf('a'), 'Unhealthy')

    const plugged = performance.now()
    await plug(463, 'a')
    await readsDisk(running, 463)
    const usable = performance.now() - plugged
    expect(usable).to.be.below(1000)
    await waitForUnplugged('a', false)
    expect(await waitFor('claim status Ready again', async () => readyCondition('reader', deviceOf('a')).then((c) => (c?.status === 'True' ? c : undefined)))).to.include({devNode: '/dev/loop463'})
    await waitForHealth('reader', deviceOf('a'), 'Healthy')
  })

  it('an agent restart neither prepares the claim again nor loses it: the container keeps its device and gets it back after a re-plug', async function () {
    this.timeout(120_000)
    const running = await waitForPod(env, `${namespace}/reader`)
    await agent!.stop('SIGTERM')
    // A claim prepared once and gone since (kubelet lost track of it): its record and spec are dropped at start.
    const recordFile = join(dir, 'state', 'dra-claims.json')
    const record = JSON.parse(await readFile(recordFile, 'utf8')) as {claims: Array<Record<string, unknown>>}
    const goneUid = '7d0c6f1e-2b3a-4c5d-8e9f-0a1b2c3d4e5f'
    record.claims.push({...record.claims[0], name: 'gone-claim', uid: goneUid})
    await writeFile(recordFile, JSON.stringify(record))
    await writeFile(claimCdiFile(env.node.containerd.cdiDir, goneUid), '{"cdiVersion": "0.5.0", "kind": "dra.devices.nfdctl.io/claim", "devices": []}')
    agent = await startAgent()
    await waitFor('the gone claim forgotten', async () => {
      const now = await readFile(recordFile, 'utf8')
      const spec = await readFile(claimCdiFile(env.node.containerd.cdiDir, goneUid), 'utf8').catch(() => undefined)
      return !now.includes(goneUid) && spec === undefined
    })
    await readsDisk(running, 463)
    await unplug(463)
    await waitFor('read fails after unplug', async () => (await readLoop(env.node, running.containerId, 463)).startsWith('failed'), {intervalMs: 20})
    await plug(464, 'a')
    await readsDisk(running, 464)
    expect(agent.lines.map((l) => l.text).filter((t) => t.includes('"claim prepared"'))).to.deep.equal([])
  })

  it('a kubelet restart loses nothing: the slice is published again, the pod keeps reading, a new pod gets a device', async function () {
    this.timeout(180_000)
    const running = await waitForPod(env, `${namespace}/reader`)
    const before = (await slices()).map((s) => s.metadata.uid)
    await env.node.kubelet.stop()
    await env.node.kubelet.start(env.client)
    // kubelet deletes the node's slices as it starts: the agent writes them again (new objects).
    await waitFor(
      'the slice written again after kubelet deleted it',
      async () => {
        const now = await slices()
        return now.length > 0 && now.every((s) => !before.includes(s.metadata.uid)) && now.some((s) => s.spec.devices?.some((d) => d.name === deviceOf('a')))
      },
      {intervalMs: 50, timeoutMs: 15_000},
    )
    await readsDisk(running, 464)
    await plug(465, 'c')
    await createClaimPod('second', 'one-disk')
    const second = await waitForPod(env, `${namespace}/second`, 60_000)
    await readsDisk(second, 465)
  })

  it('a shared claim: both pods get the device back after a re-plug, a sidecar that does not name the claim never, and a container restarted meanwhile starts with it', async function () {
    this.timeout(120_000)
    await plug(469, 'g')
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaims`, {
      body: {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaim',
        metadata: {name: 'shared-g'},
        spec: {devices: {requests: [{exactly: {deviceClassName: draClass, selectors: [{cel: {expression: `device.attributes["devices.nfdctl.io"].serial == "${serialOf('g')}"`}}]}, name: 'disk'}]}},
      },
    })
    const sharing = async (name: string): Promise<RunningPod> => {
      pods.push(`${namespace}/${name}`)
      await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPodManifest(name, env.node.name, {claim: 'shared-g', sidecar: true})})
      return waitForPod(env, `${namespace}/${name}`, 60_000)
    }
    const first = await sharing('shared-1')
    const second = await sharing('shared-2')
    for (const p of [first, second]) await readsDisk(p, 469)
    expect(await readLoop(env.node, second.containerIds.sidecar, 469)).to.match(/^failed/)

    await unplug(469)
    await waitFor('both lose it', async () => (await Promise.all([first, second].map((p) => readLoop(env.node, p.containerId, 469)))).every((r) => r.startsWith('failed')))
    await plug(460, 'g')
    for (const p of [first, second]) await readsDisk(p, 460)
    expect(await readLoop(env.node, second.containerIds.sidecar, 460)).to.match(/^failed/)

    // The claim's CDI spec follows the device: a container of the claim that starts now gets loop460.
    const claim = await env.client.request<Claim>('GET', `${dra}/namespaces/${namespace}/resourceclaims/shared-g`)
    await waitFor('the CDI spec at loop460', async () => (await readFile(claimCdiFile(env.node.containerd.cdiDir, claim.metadata.uid), 'utf8').catch(() => '')).includes('/dev/loop460'))
    await env.node.containerd.ctr('-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', first.containerId)
    const restarted = await waitFor(
      'shared-1 restarted',
      async () => {
        const now = await waitForPod(env, `${namespace}/shared-1`).catch(() => undefined)
        return now !== undefined && now.containerId !== first.containerId ? now : undefined
      },
      {timeoutMs: 60_000},
    )
    await readsDisk(restarted, 460)
    await deletePods(env, [`${namespace}/shared-1`, `${namespace}/shared-2`])
    pods.splice(pods.indexOf(`${namespace}/shared-1`), 2)
    await env.client.request('DELETE', `${dra}/namespaces/${namespace}/resourceclaims/shared-g`)
  })

  it("quota: a namespace's ResourceQuota on the class's devices refuses a claim past it", async function () {
    this.timeout(60_000)
    const ns = 'nfdctl-dra-quota'
    await createNamespace(env, ns)
    try {
      const resource = `${draClass}.deviceclass.resource.k8s.io/devices`
      await env.client.request('POST', `/api/v1/namespaces/${ns}/resourcequotas`, {body: {apiVersion: 'v1', kind: 'ResourceQuota', metadata: {name: 'disks'}, spec: {hard: {[resource]: '1'}}}})
      await waitFor('the quota counted', async () => {
        const quota = await env.client.request<{status?: {hard?: Record<string, string>}}>('GET', `/api/v1/namespaces/${ns}/resourcequotas/disks`)
        return quota.status?.hard?.[resource] === '1'
      })
      const claim = (name: string): object => ({
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaim',
        metadata: {name},
        spec: {devices: {requests: [{exactly: {deviceClassName: draClass}, name: 'disk'}]}},
      })
      await env.client.request('POST', `${dra}/namespaces/${ns}/resourceclaims`, {body: claim('first')})
      const refused = await env.client.request('POST', `${dra}/namespaces/${ns}/resourceclaims`, {body: claim('second')}).then(
        () => undefined,
        (error: unknown) => error as Error,
      )
      expect(refused?.message).to.match(/exceeded quota/)
    } finally {
      await env.client.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => {})
    }
  })

  it('admin access: refused in a namespace without the admin-access label; in one with it, a pod reads a device another pod holds', async function () {
    this.timeout(120_000)
    const adminClaim = {adminAccess: true}
    const refused = await createTemplate('admin-disk', adminClaim).then(
      () => undefined,
      (error: unknown) => error as Error,
    )
    expect(refused?.message).to.match(/admin-access/)
    const ns = 'nfdctl-dra-admin'
    await createNamespace(env, ns, {'resource.kubernetes.io/admin-access': 'true'})
    await createTemplate('admin-disk', {...adminClaim, allocationMode: 'All'}, ns)
    await createClaimPod('inspector', 'admin-disk', ns)
    const inspector = await waitForPod(env, `${ns}/inspector`, 60_000)
    // Disk a is the reader's (loop464); admin access sees it too.
    await readsDisk(inspector, 464)
    await deletePods(env, [`${ns}/inspector`])
    pods.splice(pods.indexOf(`${ns}/inspector`), 1)
    await env.client.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => {})
  })

  it('a DeviceClass edit reaches the slice and the resource.k8s.io DeviceClass; with allocation no longer DRA both go', async function () {
    this.timeout(60_000)
    await plug(470, 'd')
    await plug(466, 'e')
    await env.client.request('PATCH', `${classesPath}/dral`, {
      body: {
        spec: {
          match: [
            {devName: 'loop46[0-9]', subsystem: 'block'},
            {devName: 'loop470', subsystem: 'block'},
          ],
        },
      },
      contentType: 'application/merge-patch+json',
    })
    await waitForSlice('disk d joins with the edited match', (n) => n.includes(deviceOf('d')))
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'dral2'}, spec: {allocation: 'DRA', match: [{devName: 'loop466', subsystem: 'block'}]}},
    })
    await waitFor('dral2.devices.nfdctl.io', () => env.client.request('GET', `${dra}/deviceclasses/dral2.devices.nfdctl.io`).catch(() => undefined))
    const both = await waitFor('disk e in both classes', async () => {
      const device = (await slices()).flatMap((s) => s.spec.devices ?? []).find((d) => d.name === deviceOf('e'))
      return device?.attributes['devices.nfdctl.io/class_dral2'] === undefined ? undefined : device
    })
    expect(both.attributes['devices.nfdctl.io/class_dral']).to.deep.equal({bool: true})
    await env.client.request('PATCH', `${classesPath}/dral2`, {body: {spec: {allocation: 'Device'}}, contentType: 'application/merge-patch+json'})
    await waitFor('dral2.devices.nfdctl.io deleted', () =>
      env.client.request('GET', `${dra}/deviceclasses/dral2.devices.nfdctl.io`).then(
        () => undefined,
        () => true,
      ),
    )
    // Disk e is in a Device class and a DRA class now: two allocators could hand it out, so neither does.
    await waitFor('disk e out of the slice', async () => (await slices()).flatMap((s) => s.spec.devices ?? []).every((d) => d.name !== deviceOf('e')))
    const refused = await waitFor('disk e refused in dral2', async () => {
      const {status} = await env.client.request<{status?: {nodes?: Array<{node: string; refused?: Array<{id: string; reason: string}>}>}}>('GET', `${classesPath}/dral2`)
      return status?.nodes?.find((n) => n.node === env.node.name)?.refused
    })
    expect(refused.map((r) => r.reason)).to.deep.equal(['ExclusiveOverlap'])
    // Side by side: dral2, narrowed to a disk no DRA class has, is the same agent's device plugin, and kubelet offers its device.
    await plug(471, 'f')
    await env.client.request('PATCH', `${classesPath}/dral2`, {body: {spec: {match: [{devName: 'loop471', subsystem: 'block'}]}}, contentType: 'application/merge-patch+json'})
    await waitFor('disk e back in the slice', async () => (await slices()).flatMap((s) => s.spec.devices ?? []).some((d) => d.name === deviceOf('e')))
    await waitFor('devices.nfdctl.io/dral2 allocatable', async () => (await allocatable(env, 'devices.nfdctl.io/dral2')) === 1, {timeoutMs: 15_000})
    await env.client.request('DELETE', `${classesPath}/dral2`)

    // A DRA class deleted takes its resource.k8s.io DeviceClass with it.
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'dral3'}, spec: {allocation: 'DRA', match: [{devName: 'loop467', subsystem: 'block'}]}},
    })
    await waitFor('dral3.devices.nfdctl.io', () => env.client.request('GET', `${dra}/deviceclasses/dral3.devices.nfdctl.io`).catch(() => undefined))
    await env.client.request('DELETE', `${classesPath}/dral3`)
    await waitFor(
      'dral3.devices.nfdctl.io deleted with its class',
      () =>
        env.client.request('GET', `${dra}/deviceclasses/dral3.devices.nfdctl.io`).then(
          () => undefined,
          () => true,
        ),
      {timeoutMs: 15_000},
    )
  })

  it('a class edit that drops a claimed device: the container loses it, the claim stays allocated and says DeviceNotInClass, not unplugged; edited back, the container reads it again', async function () {
    this.timeout(120_000)
    await plug(467, 'h')
    await createClaimPod('edited', 'one-disk')
    const running = await waitForPod(env, `${namespace}/edited`, 60_000)
    const held = (await claimOf('edited')).status?.allocation?.devices?.results?.[0]?.device
    const index = held === undefined ? undefined : pluggedAt.get(held)
    if (held === undefined || index === undefined) throw new Error(`the claim of pod edited holds ${held}, no test disk`)
    await readsDisk(running, index)
    const setMatch = (match: Array<{devName: string; subsystem: string}>): Promise<unknown> =>
      env.client.request('PATCH', `${classesPath}/dral`, {body: {spec: {match}}, contentType: 'application/merge-patch+json'})
    const whole = [
      {devName: 'loop46[0-9]', subsystem: 'block'},
      {devName: 'loop470', subsystem: 'block'},
    ]
    await setMatch(whole.flatMap((rule) => (rule.devName === 'loop46[0-9]' && index < 470 ? [{...rule, devName: `loop46[!${index - 460}]`}] : rule.devName === `loop${index}` ? [] : [rule])))

    await waitFor('read fails once the class leaves the device out', async () => (await readLoop(env.node, running.containerId, index)).startsWith('failed'), {intervalMs: 20})
    await waitForSlice('the device gone from the slice', (n) => !n.includes(held))
    const notReady = await waitFor('claim status not Ready', async () => readyCondition('edited', held).then((c) => (c?.status === 'False' ? c : undefined)))
    expect(notReady.reason).to.equal('DeviceNotInClass')
    await waitForHealth('edited', held, 'Unhealthy')
    // The allocation is the scheduler's: the claim keeps its device while its pod runs.
    expect((await claimOf('edited')).status?.allocation?.devices?.results?.map((r) => r.device)).to.deep.equal([held])

    await setMatch(whole)
    await readsDisk(running, index)
    await waitFor('claim status Ready again', async () => (await readyCondition('edited', held))?.status === 'True', {timeoutMs: 10_000})
    await deletePods(env, [`${namespace}/edited`])
    pods.splice(pods.indexOf(`${namespace}/edited`), 1)
    await unplug(467)
  })

  it('claims kubelet cannot have prepared get an error each, on v1 and v1beta1, and the driver goes on', async function () {
    const api = await kubeletDraApi()
    const socket = join(env.node.kubelet.rootDir, 'plugins', 'devices.nfdctl.io', 'dra.sock')
    const claims = [
      {name: 'no-such-claim', namespace, uid: '0b5e7a26-54f6-4a57-9d3e-3c1e0c7f0a11'},
      {name: 'reader-disk', namespace, uid: '../../../etc/passwd'},
    ]
    for (const definition of api.draPlugin) {
      const Client = api.grpc.makeGenericClientConstructor(definition, 'DRAPlugin')
      const client = new Client(`unix:${socket}`, api.grpc.credentials.createInsecure())
      try {
        const answer = await unary<object, {claims: Record<string, {error: string; devices: unknown[]}>}>(client, 'NodePrepareResources', {claims}, 5000)
        expect(Object.keys(answer.claims).sort()).to.deep.equal(claims.map((c) => c.uid).sort())
        expect(answer.claims[claims[0].uid].error).to.match(/does not exist/)
        expect(answer.claims[claims[1].uid].error).to.match(/no valid UID/)
        expect(answer.claims[claims[1].uid].devices).to.deep.equal([])
      } finally {
        client.close()
      }
    }
    // Still serving kubelet: a new pod gets a device.
    await plug(468, 'f')
    await createClaimPod('after-bad-claims', 'one-disk')
    const running = await waitForPod(env, `${namespace}/after-bad-claims`, 60_000)
    const device = (await claimOf('after-bad-claims')).status?.allocation?.devices?.results?.[0]?.device
    await readsDisk(running, pluggedAt.get(device ?? '') ?? -1)
  })
})
