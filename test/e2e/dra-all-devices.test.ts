import {expect} from 'chai'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {claimPodManifest, claimTemplateManifest, draAgentArgs, type SerialDisks} from '../../harness/devices/dra-agent.js'
import {type BackedLoops, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {clusterGates} from '../support/kube-version.js'
import {serialDiskNode} from '../support/test-node.js'

// Loop devices 850-869 belong to these tests: the class draall takes 850-859.
// A claim with allocationMode All asks for every device of a class; the scheduler's allocator refuses a device
// whose NoSchedule taint the request does not tolerate, so while one device is unplugged (tainted
// devices.nfdctl.io/unplugged) such a claim is allocated only when its request tolerates that taint. The agent
// then prepares it with the devices present and gives the unplugged one when it is back. Where the API server
// drops device taints (1.34 and 1.35 by default), the unplugged device leaves the slice, so such a claim is
// allocated the devices present at scheduling and keeps them.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const namespace = 'nfdctl-dra-all'

interface PodObject {
  status?: {
    conditions?: Array<{type: string; status: string; reason?: string; message?: string}>
    resourceClaimStatuses?: Array<{name: string; resourceClaimName?: string}>
  }
}
interface Claim {
  status?: {
    allocation?: {devices?: {results?: Array<{device: string; adminAccess?: boolean}>}}
    devices?: Array<{device: string; conditions?: Array<{type: string; status: string; reason?: string}>}>
  }
}

describe('devices agent --dra on a real node: claims with allocationMode All while a device of the class is unplugged', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let loops: BackedLoops
  let disks: SerialDisks
  let agent: CliProcess | undefined
  const pods: string[] = []

  const plug = async (index: number, disk: string): Promise<void> => {
    await disks.record(index, disk)
    await loops.add(index)
  }
  const unplug = async (index: number): Promise<void> => {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
  }
  const pod = (name: string): Promise<PodObject> => env.client.request<PodObject>('GET', `/api/v1/namespaces/${namespace}/pods/${name}`)
  const claimOf = async (name: string): Promise<Claim | undefined> => {
    const claimName = (await pod(name)).status?.resourceClaimStatuses?.[0]?.resourceClaimName
    return claimName === undefined ? undefined : env.client.request<Claim>('GET', `${dra}/namespaces/${namespace}/resourceclaims/${claimName}`)
  }
  const createClaimPod = async (name: string, template: string): Promise<void> => {
    pods.push(`${namespace}/${name}`)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPodManifest(name, env.node.name, {template})})
  }
  const reads = async (running: RunningPod, index: number): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index}`, async () => (await readLoop(env.node, running.containerId, index)) === loopData(index), {intervalMs: 20, timeoutMs: 10_000})
  }
  /** The template of the upstream admin-access example: every device of the class, for monitoring. */
  const monitorTemplate = (name: string, more: object = {}): object => claimTemplateManifest(name, 'draall.devices.nfdctl.io', {adminAccess: true, allocationMode: 'All', ...more})

  before(async function () {
    this.timeout(120_000)
    ;({dir, disks, env, loops, udevDir} = await serialDiskNode(this, 'nfdctl-all'))
    await createNamespace(env, namespace, {'resource.kubernetes.io/admin-access': 'true'})
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'draall'}, spec: {allocation: 'DRA', match: [{devName: 'loop85[0-9]', subsystem: 'block'}]}},
    })
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {body: monitorTemplate('every-disk')})
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {
      body: monitorTemplate('every-disk-present-or-not', {tolerations: [{key: 'devices.nfdctl.io/unplugged', operator: 'Exists'}]}),
    })
    await plug(850, 'a')
    await plug(851, 'b')
    agent = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir}))
    await agent.waitForLine<{msg: string}>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
    await waitFor('draall.devices.nfdctl.io', () => env.client.request('GET', `${dra}/deviceclasses/draall.devices.nfdctl.io`).catch(() => undefined))
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && agent) console.log(agent.transcript())
    await agent?.stop('SIGTERM')
    await deletePods(env, pods.splice(0))
    for (const i of loops.plugged) await unplug(i)
    await env.client.request('DELETE', `${classesPath}/draall`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
    await rm(dir, {force: true, recursive: true})
  })

  const sliced = async (): Promise<Array<{name: string; taints?: Array<{key: string}>}>> => {
    const slices = await env.client.request<{items: Array<{spec: {devices?: Array<{name: string; taints?: Array<{key: string}>}>}}>}>('GET', `${dra}/resourceslices`, {
      query: {fieldSelector: `spec.nodeName=${env.node.name},spec.driver=devices.nfdctl.io`},
    })
    return slices.items.flatMap((s) => s.spec.devices ?? [])
  }

  if (!clusterGates.deviceTaints) {
    it('with disk b unplugged and no device taints on this release: b leaves the slice, a claim for every disk is allocated disk a alone and its pod reads it; b back, the claim keeps disk a alone', async function () {
      this.timeout(180_000)
      await unplug(851)
      await waitFor('disk b gone from the slice', async () => !(await sliced()).some((d) => d.name === disks.deviceOf('b')), {timeoutMs: 10_000})
      await createClaimPod('plain', 'every-disk')
      const plain = await waitForPod(env, `${namespace}/plain`, 60_000)
      expect((await claimOf('plain'))?.status?.allocation?.devices?.results?.map((r) => r.device)).to.deep.equal([disks.deviceOf('a')])
      await reads(plain, 850)
      await plug(852, 'b')
      await waitFor('disk b back in the slice', async () => (await sliced()).some((d) => d.name === disks.deviceOf('b')), {timeoutMs: 10_000})
      expect((await claimOf('plain'))?.status?.allocation?.devices?.results?.map((r) => r.device)).to.deep.equal([disks.deviceOf('a')])
      expect((await readLoop(env.node, plain.containerId, 852)).startsWith('failed'), 'the pod never gets b').to.equal(true)
    })
    return
  }

  it('with disk b unplugged: a claim for every disk without the toleration is not allocated; with it, the pod runs with disk a, gets disk b when it is back under another loop number, and its claim says b is unplugged meanwhile', async function () {
    this.timeout(180_000)
    // Both present: the plain claim is allocated and its pod reads both.
    await createClaimPod('before', 'every-disk')
    const before = await waitForPod(env, `${namespace}/before`, 60_000)
    await reads(before, 850)
    await reads(before, 851)
    await deletePods(env, [`${namespace}/before`])
    pods.splice(pods.indexOf(`${namespace}/before`), 1)

    await unplug(851)
    await waitFor('disk b tainted in the slice', async () => (await sliced()).some((d) => d.name === disks.deviceOf('b') && (d.taints ?? []).some((t) => t.key === 'devices.nfdctl.io/unplugged')), {
      timeoutMs: 10_000,
    })

    await createClaimPod('plain', 'every-disk')
    const condition = await waitFor('plain unschedulable', async () => (await pod('plain')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {timeoutMs: 30_000})
    expect(condition.reason).to.equal('Unschedulable')
    expect((await claimOf('plain'))?.status?.allocation).to.equal(undefined)

    await createClaimPod('monitor', 'every-disk-present-or-not')
    const monitor = await waitForPod(env, `${namespace}/monitor`, 60_000)
    const claim = await claimOf('monitor')
    expect(claim?.status?.allocation?.devices?.results?.map((r) => [r.device, r.adminAccess])).to.have.deep.members([
      [disks.deviceOf('a'), true],
      [disks.deviceOf('b'), true],
    ])
    await reads(monitor, 850)
    // Disk b's entry in the claim's status: not ready, unplugged.
    await waitFor(
      "the claim's status says b is unplugged",
      async () => {
        const entry = (await claimOf('monitor'))?.status?.devices?.find((d) => d.device === disks.deviceOf('b'))
        return entry?.conditions?.find((c) => c.type === 'Ready' && c.status === 'False' && c.reason === 'DeviceUnplugged')
      },
      {timeoutMs: 15_000},
    )

    await plug(852, 'b')
    await reads(monitor, 852)
    // The plain pod is allocated now that no device of the class is unplugged.
    const plain = await waitForPod(env, `${namespace}/plain`, 60_000)
    await reads(plain, 852)
  })
})
