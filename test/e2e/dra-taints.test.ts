import {expect} from 'chai'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import type {DeviceTaint} from '../../src/lib/dra/resource-slices.js'
import {Informer} from '../../src/lib/kube/informer.js'
import type {ObjectMeta} from '../../src/lib/kube/resource.js'
import {noopLogger} from '../../src/lib/observe/logger.js'
import {claimPodManifest, claimTemplateManifest, draAgentArgs, type SerialDisks, sliceCodec} from '../../harness/devices/dra-agent.js'
import {type BackedLoops, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {clusterGates} from '../support/kube-version.js'
import {serialDiskNode} from '../support/test-node.js'

// Loop devices 510-519 belong to these tests: the class drat takes 510-514, drax (NoExecute after 3 s) 515-519.
// Each test disk has a udev serial, so that plugged in again under another loop number it is the same device.
// Where the API server drops device taints (DRADeviceTaints off: 1.34 and 1.35 by default), the agent leaves an
// unplugged device out of the slice instead, and the classes say so in their status and an Event.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const unplugged = 'devices.nfdctl.io/unplugged'

interface Slice {
  metadata: ObjectMeta
  spec: {devices?: Array<{name: string; taints?: DeviceTaint[]}>}
}
interface PodObject {
  metadata: {uid: string; deletionTimestamp?: string}
  status?: {
    conditions?: Array<{type: string; status: string; reason?: string; message?: string}>
    resourceClaimStatuses?: Array<{name: string; resourceClaimName?: string}>
  }
}
interface Claim {
  status?: {allocation?: {devices?: {results?: Array<{device: string}>}}}
}

describe('devices agent --dra on a real node: an unplugged device stays in the slice, tainted (KEP-5055 device taints)', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let loops: BackedLoops
  let disks: SerialDisks
  let agent: CliProcess | undefined
  let slices: Informer<Slice> | undefined
  const watching = new AbortController()
  const namespace = 'nfdctl-dra-taints'
  const pods: string[] = []
  /** Each state of the node's slices as the watch delivered it: device name → taints. */
  const seen: Array<{at: number; devices: Map<string, DeviceTaint[]>}> = []
  const deviceOf = (disk: string): string => disks.deviceOf(disk)

  const plug = async (index: number, disk: string): Promise<void> => {
    await disks.record(index, disk)
    await loops.add(index)
  }
  const unplug = async (index: number): Promise<void> => {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
  }
  const noteSlices = (): void => {
    const devices = new Map([...(slices?.cache.values() ?? [])].flatMap((s) => (s.spec.devices ?? []).map((d) => [d.name, d.taints ?? []] as const)))
    seen.push({at: performance.now(), devices})
  }
  /** The first state the watch delivers, from `after` on, that `wanted` takes. */
  const onWatch = (what: string, after: number, wanted: (devices: Map<string, DeviceTaint[]>) => boolean, timeoutMs = 10_000) =>
    waitFor(what, async () => seen.slice(after).find((s) => wanted(s.devices)), {intervalMs: 10, timeoutMs})
  const taintOf = (devices: Map<string, DeviceTaint[]>, disk: string): DeviceTaint | undefined => devices.get(deviceOf(disk))?.find((t) => t.key === unplugged)

  const createClaimPod = async (name: string, template: string): Promise<void> => {
    pods.push(`${namespace}/${name}`)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPodManifest(name, env.node.name, {template})})
  }
  const pod = (name: string): Promise<PodObject> => env.client.request<PodObject>('GET', `/api/v1/namespaces/${namespace}/pods/${name}`)
  const allocatedTo = async (name: string): Promise<string[] | undefined> => {
    const claimName = (await pod(name)).status?.resourceClaimStatuses?.[0]?.resourceClaimName
    if (claimName === undefined) return undefined
    const claim = await env.client.request<Claim>('GET', `${dra}/namespaces/${namespace}/resourceclaims/${claimName}`)
    return claim.status?.allocation?.devices?.results?.map((r) => r.device)
  }
  /** The pod stays unscheduled with the scheduler's reason, its claim unallocated. */
  const unschedulable = async (name: string): Promise<void> => {
    const condition = await waitFor(`${name} unschedulable`, async () => (await pod(name)).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {timeoutMs: 30_000})
    expect(condition.reason).to.equal('Unschedulable')
    expect(await allocatedTo(name)).to.equal(undefined)
  }
  const readsDisk = async (running: RunningPod, index: number): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index}`, async () => (await readLoop(env.node, running.containerId, index)) === loopData(index), {intervalMs: 20, timeoutMs: 10_000})
  }
  const forget = async (name: string): Promise<void> => {
    await deletePods(env, [`${namespace}/${name}`])
    pods.splice(pods.indexOf(`${namespace}/${name}`), 1)
  }

  before(async function () {
    this.timeout(120_000)
    ;({dir, disks, env, loops, udevDir} = await serialDiskNode(this, 'nfdctl-taints'))
    await createNamespace(env, namespace)
    const draClass = (name: string, devName: string, more: object = {}) => ({
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {name},
      spec: {allocation: 'DRA', match: [{devName, subsystem: 'block'}], ...more},
    })
    await env.client.request('POST', classesPath, {body: draClass('drat', 'loop51[0-4]')})
    await env.client.request('POST', classesPath, {body: draClass('drax', 'loop51[5-9]', {unplugged: {effect: 'NoExecute', noExecuteAfter: '3s'}})})
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {body: claimTemplateManifest('one-disk', 'drat.devices.nfdctl.io')})
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {body: claimTemplateManifest('evictable', 'drax.devices.nfdctl.io')})
    slices = new Informer<Slice>(
      {
        client: env.client,
        fieldSelector: `spec.nodeName=${env.node.name},spec.driver=devices.nfdctl.io`,
        logger: noopLogger,
        onChanged: noteSlices,
        onDeleted: noteSlices,
        pageSize: 500,
        resource: {group: 'resource.k8s.io', namespaced: false, plural: 'resourceslices', version: 'v1'},
      },
      sliceCodec<Slice>(),
    )
    await slices.start(watching.signal)
    await plug(510, 'a')
    agent = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir}))
    await agent.waitForLine<{msg: string}>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
    for (const name of ['drat', 'drax']) await waitFor(`${name}.devices.nfdctl.io`, () => env.client.request('GET', `${dra}/deviceclasses/${name}.devices.nfdctl.io`).catch(() => undefined))
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && agent) console.log(agent.transcript())
    watching.abort()
    await slices?.stop()
    await agent?.stop('SIGTERM')
    await deletePods(env, pods.splice(0))
    for (const i of loops.plugged) await unplug(i)
    await env.client.request('DELETE', `${dra}/devicetaintrules/nfdctl-e2e-maintenance`).catch(() => {})
    for (const name of ['drat', 'drax']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
    await rm(dir, {force: true, recursive: true})
  })

  if (!clusterGates.deviceTaintRules) {
    it("resource.k8s.io/v1 serves no DeviceTaintRule on this release: an operator's rule is not an option here", async function () {
      const refused = await env.client.request('GET', `${dra}/devicetaintrules`).then(
        () => undefined,
        (error: Error) => error,
      )
      expect(String(refused)).to.match(/404|not found/i)
    })
  }

  if (!clusterGates.deviceTaints) {
    it('no device taints on this release: unplugged, the device leaves the slice and a claim made meanwhile is not allocated; re-plugged under another loop number, the claim gets it', async function () {
      this.timeout(120_000)
      await onWatch('disk a in the slice', 0, (d) => d.has(deviceOf('a')))
      const from = seen.length
      const pulled = performance.now()
      await unplug(510)
      const gone = await onWatch('disk a gone from the slice', from, (d) => !d.has(deviceOf('a')))
      expect(gone.at - pulled, 'unplug → gone on the watch').to.be.below(1000)
      await createClaimPod('waiter', 'one-disk')
      await unschedulable('waiter')
      await plug(511, 'a')
      const running = await waitForPod(env, `${namespace}/waiter`, 60_000)
      expect(await allocatedTo('waiter')).to.deep.equal([deviceOf('a')])
      await readsDisk(running, 511)
    })

    it('each DRA class says in its status and an Event that unplugged devices are not tainted here', async function () {
      this.timeout(60_000)
      for (const name of ['drat', 'drax']) {
        const condition = await waitFor(`UnpluggedDevicesTainted on ${name}`, async () => {
          const got = await env.client.request<{status?: {conditions?: Array<{type: string; status: string; reason: string; message: string}>}}>('GET', `${classesPath}/${name}`)
          return got.status?.conditions?.find((c) => c.type === 'UnpluggedDevicesTainted')
        })
        expect(condition).to.include({reason: 'DeviceTaintsDropped', status: 'False'})
        expect(condition.message).to.include('DRADeviceTaints')
        const events = await env.client.request<{items: unknown[]}>('GET', '/api/v1/namespaces/default/events', {
          query: {fieldSelector: `involvedObject.name=${name},involvedObject.kind=DeviceClass,reason=DeviceTaintsDropped`},
        })
        expect(events.items, `the Event on ${name}`).to.not.be.empty
      }
    })
    return
  }

  it('unplugged: the watch sees the device still listed with the NoSchedule taint, and a claim made meanwhile is not allocated; re-plugged under another loop number: untainted, the claim gets it', async function () {
    this.timeout(120_000)
    await onWatch('disk a in the slice, untainted', 0, (d) => d.has(deviceOf('a')) && taintOf(d, 'a') === undefined)
    const from = seen.length
    const pulled = performance.now()
    await unplug(510)
    const tainted = await onWatch('disk a tainted', from, (d) => taintOf(d, 'a') !== undefined)
    expect(tainted.at - pulled, 'unplug → taint on the watch').to.be.below(1000)
    const taint = taintOf(tainted.devices, 'a')!
    expect(taint).to.include({effect: 'NoSchedule', key: unplugged})
    expect(Math.abs(Date.parse(taint.timeAdded!) - Date.now())).to.be.below(10_000)
    expect(
      seen.slice(from).every((s) => s.devices.has(deviceOf('a'))),
      'never left the slice',
    ).to.equal(true)

    await createClaimPod('waiter', 'one-disk')
    await unschedulable('waiter')

    const back = seen.length
    await plug(511, 'a')
    await onWatch('disk a untainted', back, (d) => d.has(deviceOf('a')) && taintOf(d, 'a') === undefined)
    const running = await waitForPod(env, `${namespace}/waiter`, 60_000)
    expect(await allocatedTo('waiter')).to.deep.equal([deviceOf('a')])
    await readsDisk(running, 511)
  })

  if (clusterGates.deviceTaintRules)
    it("an operator's DeviceTaintRule (resource.k8s.io/v1) on one of the driver's devices keeps claims off it until it is deleted", async function () {
      this.timeout(120_000)
      await plug(512, 'b')
      await onWatch('disk b in the slice', 0, (d) => d.has(deviceOf('b')))
      await env.client.request('POST', `${dra}/devicetaintrules`, {
        body: {
          apiVersion: 'resource.k8s.io/v1',
          kind: 'DeviceTaintRule',
          metadata: {name: 'nfdctl-e2e-maintenance'},
          spec: {deviceSelector: {device: deviceOf('b'), driver: 'devices.nfdctl.io', pool: env.node.name}, taint: {effect: 'NoSchedule', key: 'example.com/maintenance'}},
        },
      })
      // Disk a is held by the first test's pod: disk b, tainted by the rule, is the only one left.
      await createClaimPod('ruled', 'one-disk')
      await unschedulable('ruled')
      await env.client.request('DELETE', `${dra}/devicetaintrules/nfdctl-e2e-maintenance`)
      const running = await waitForPod(env, `${namespace}/ruled`, 60_000)
      expect(await allocatedTo('ruled')).to.deep.equal([deviceOf('b')])
      await readsDisk(running, 512)
      await forget('ruled')
    })

  it('a class with unplugged NoExecute after 3s: the taint turns NoExecute 3 s after the unplug and kube-controller-manager evicts the pod holding the device', async function () {
    this.timeout(120_000)
    await plug(515, 'x')
    await createClaimPod('evicted', 'evictable')
    const running = await waitForPod(env, `${namespace}/evicted`, 60_000)
    await readsDisk(running, 515)
    const from = seen.length
    await unplug(515)
    const first = await onWatch('disk x NoSchedule', from, (d) => taintOf(d, 'x')?.effect === 'NoSchedule')
    const noExecute = await onWatch('disk x NoExecute', from, (d) => taintOf(d, 'x')?.effect === 'NoExecute', 15_000)
    expect(noExecute.at - first.at).to.be.within(2000, 5000)
    expect(Date.parse(taintOf(noExecute.devices, 'x')!.timeAdded!) - Date.parse(taintOf(first.devices, 'x')!.timeAdded!)).to.be.within(2000, 4000)
    const gone = await waitFor(
      'the pod evicted',
      async () => {
        const now = await pod('evicted').catch(() => undefined)
        if (now === undefined) return {deleted: true}
        const target = now.status?.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True')
        return now.metadata.deletionTimestamp === undefined ? undefined : {deleted: false, target}
      },
      {timeoutMs: 30_000},
    )
    if (!gone.deleted) expect(gone.target?.reason).to.equal('DeletionByDeviceTaintManager')
    await forget('evicted')
  })
})
