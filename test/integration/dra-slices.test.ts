import {expect} from 'chai'
import {setTimeout as sleep} from 'node:timers/promises'

import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import type {DeviceClass} from '../../src/lib/devices/types.js'
import {DraDeviceClasses} from '../../src/lib/dra/dra-device-classes.js'
import {sliceDeviceOf, type SliceDevice} from '../../src/lib/dra/resource-slices.js'
import {SlicePublisher} from '../../src/lib/dra/slice-publisher.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {noopLogger} from '../../src/lib/observe/logger.js'
import {loopDevice} from '../../harness/devices/loop-device.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient, startControlPlane} from '../support/cluster.js'
import {recordingLogger} from '../support/recording-logger.js'
import {deviceClassManifest} from '../support/device-class.js'

interface Slice {
  metadata: {name: string; uid: string}
  spec: {nodeName: string; pool: {name: string; generation: number; resourceSliceCount: number}; devices?: Array<{name: string; attributes: Record<string, unknown>; taints?: unknown[]}>}
}

const slicesPath = '/apis/resource.k8s.io/v1/resourceslices'
/** Disks with serials: each a distinct device name, as a node full of USB disks would have. */
const disks = (count: number): SliceDevice[] => Array.from({length: count}, (_, i) => sliceDeviceOf(loopDevice(i, {ID_SERIAL: `disk-${String(i).padStart(3, '0')}`}), ['disks']).device)
/** The same disks, every `every`-th one unplugged (as unplugged-devices.ts lists it). */
const withUnplugged = (count: number, every: number): SliceDevice[] =>
  disks(count).map((d, i) => (i % every === 0 ? {...d, taints: [{effect: 'NoSchedule' as const, key: 'devices.nfdctl.io/unplugged', timeAdded: '2026-12-06T21:00:00Z'}]} : d))

describe('DRA driver against kube-apiserver: the pool of ResourceSlices and the resource.k8s.io DeviceClasses', function () {
  let client: KubeClient
  const nodeName = 'dra-pool-node'
  let publisher: SlicePublisher | undefined
  const controller = new AbortController()
  let errors = 0

  const slices = async (): Promise<Slice[]> => (await client.request<{items: Slice[]}>('GET', slicesPath, {query: {fieldSelector: `spec.nodeName=${nodeName}`}})).items
  const pool = async (): Promise<{slices: Slice[]; devices: string[]}> => {
    const found = await slices()
    return {devices: found.flatMap((s) => (s.spec.devices ?? []).map((d) => d.name)).sort(), slices: found}
  }

  before(async function () {
    ;({client} = await adminClient(this))
  })

  after(async () => {
    controller.abort()
    await publisher?.stop()
    await client.request('DELETE', slicesPath, {query: {fieldSelector: `spec.nodeName=${nodeName}`}}).catch(() => {})
  })

  it('300 devices: three slices the API server accepts, one generation and slice count; 10 devices: one, the rest deleted', async function () {
    publisher = new SlicePublisher({client, logger: noopLogger, nodeName, onError: () => errors++})
    publisher.setDevices(disks(300))
    await publisher.start(controller.signal).synced
    const full = await waitFor('three slices', async () => {
      const p = await pool()
      return p.devices.length === 300 ? p : undefined
    })
    expect(full.slices.map((s) => s.spec.devices?.length).sort()).to.deep.equal([128, 128, 44])
    expect(new Set(full.slices.map((s) => `${s.spec.pool.generation}/${s.spec.pool.resourceSliceCount}/${s.spec.pool.name}`))).to.have.lengthOf(1)
    expect(full.slices[0].spec.pool.resourceSliceCount).to.equal(3)
    const generation = full.slices[0].spec.pool.generation

    publisher.setDevices(disks(10))
    const small = await waitFor('one slice', async () => {
      const p = await pool()
      return p.slices.length === 1 && p.devices.length === 10 ? p : undefined
    })
    expect(small.slices[0].spec.pool.resourceSliceCount).to.equal(1)
    expect(small.slices[0].spec.pool.generation).to.be.above(generation)
    // Settled: its own writes coming back on the watch are not changes (no rewrite loop).
    const settled = (await slices())[0]
    await sleep(1500)
    const later = await slices()
    expect(later.map((s) => [s.metadata.uid, s.spec.pool.generation])).to.deep.equal([[settled.metadata.uid, settled.spec.pool.generation]])
    expect(errors).to.equal(0)
  })

  it('a slice deleted (as kubelet does when it starts) or changed by someone else is written again', async function () {
    const [slice] = await slices()
    await client.request('DELETE', `${slicesPath}/${slice.metadata.name}`)
    const again = await waitFor('the slice written again', async () => (await slices()).find((s) => s.metadata.uid !== slice.metadata.uid))
    expect(again.spec.devices).to.have.lengthOf(10)
    await client.request('PATCH', `${slicesPath}/${again.metadata.name}`, {
      body: {spec: {devices: [{attributes: {}, name: 'intruder'}]}},
      contentType: 'application/merge-patch+json',
    })
    const restored = await waitFor('the slice restored', async () => {
      const p = await pool()
      return p.devices.length === 10 && !p.devices.includes('intruder') ? p : undefined
    })
    expect(restored.devices).to.deep.equal(disks(10).map((d) => d.name))
  })

  it('resource.k8s.io DeviceClasses: applied for DRA classes, owned by their class, deleted when a class is no longer DRA', async function () {
    const made: string[] = []
    try {
      for (const name of ['dra-pool-a', 'dra-pool-b']) {
        await client.request('POST', deviceClassesPath, {body: deviceClassManifest(name, {allocation: 'DRA'})})
        made.push(name)
      }
      const read = async (name: string): Promise<DeviceClass> => client.request<DeviceClass>('GET', `${deviceClassesPath}/${name}`)
      const classes = [await read('dra-pool-a'), await read('dra-pool-b')]
      let failures = 0
      const sync = new DraDeviceClasses({client, logger: noopLogger, onError: () => failures++})
      await sync.sync(classes)
      const a = await client.request<{metadata: {ownerReferences: Array<{uid: string; kind: string}>}}>('GET', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-a.devices.nfdctl.io')
      expect(a.metadata.ownerReferences).to.deep.include({apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', name: 'dra-pool-a', uid: classes[0].metadata.uid})
      // Another agent applying the same objects changes nothing.
      const before = await client.request<{metadata: {resourceVersion: string}}>('GET', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-a.devices.nfdctl.io')
      await new DraDeviceClasses({client, logger: noopLogger, onError: () => failures++}).sync(classes)
      const after = await client.request<{metadata: {resourceVersion: string}}>('GET', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-a.devices.nfdctl.io')
      expect(after.metadata.resourceVersion).to.equal(before.metadata.resourceVersion)
      // One deleted by someone else is applied again by an agent that watches them.
      const controller = new AbortController()
      const watching = new DraDeviceClasses({client, logger: noopLogger, onError: () => failures++})
      watching.start(controller.signal)
      await watching.sync(classes)
      await client.request('DELETE', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-a.devices.nfdctl.io')
      await waitFor('dra-pool-a.devices.nfdctl.io applied again', () => client.request('GET', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-a.devices.nfdctl.io').catch(() => undefined), {
        timeoutMs: 5000,
      })
      controller.abort()
      await watching.stop()
      await sync.sync([classes[0], {...classes[1], spec: {...classes[1].spec, allocation: 'Device'}}])
      const gone = await client.request('GET', '/apis/resource.k8s.io/v1/deviceclasses/dra-pool-b.devices.nfdctl.io').then(
        () => false,
        () => true,
      )
      expect(gone).to.equal(true)
      expect(failures).to.equal(0)
    } finally {
      for (const name of made) await client.request('DELETE', `${deviceClassesPath}/${name}`).catch(() => {})
      for (const name of made) await client.request('DELETE', `/apis/resource.k8s.io/v1/deviceclasses/${name}.devices.nfdctl.io`).catch(() => {})
    }
  })

  it('unplugged devices: the API server keeps their taints, 64 devices a slice, and the pool settles (its taints read back equal)', async function () {
    publisher?.setDevices(withUnplugged(100, 10))
    const tainted = await waitFor('two slices with taints', async () => {
      const p = await pool()
      return p.slices.length === 2 && p.devices.length === 100 ? p : undefined
    })
    expect(tainted.slices.map((s) => s.spec.devices?.length).sort()).to.deep.equal([36, 64])
    const taints = tainted.slices.flatMap((s) => (s.spec.devices ?? []).flatMap((d) => d.taints ?? []))
    expect(taints).to.have.length(10)
    expect(taints[0]).to.deep.equal({effect: 'NoSchedule', key: 'devices.nfdctl.io/unplugged', timeAdded: '2026-12-06T21:00:00Z'})
    const settled = (await slices()).map((s) => [s.metadata.uid, s.spec.pool.generation])
    await sleep(1500)
    expect((await slices()).map((s) => [s.metadata.uid, s.spec.pool.generation])).to.deep.equal(settled)
  })
})

describe('DRA driver against a kube-apiserver with DRADeviceTaints off (a cluster before 1.36)', function () {
  const nodeName = 'dra-untainted-node'
  const controller = new AbortController()
  let publisher: SlicePublisher | undefined
  let client: KubeClient | undefined

  after(async () => {
    controller.abort()
    await publisher?.stop()
    client?.close()
  })

  it('drops the taints: the publisher leaves the unplugged devices out (as without taints) and says why once', async function () {
    this.timeout(120_000)
    const plane = await startControlPlane(this, ['--feature-gates=DRADeviceTaints=false,DRADeviceTaintRules=false'])
    client = await plane.client()
    const log = recordingLogger()
    publisher = new SlicePublisher({client, logger: log, nodeName, onError: () => {}})
    publisher.setDevices(withUnplugged(10, 5))
    await publisher.start(controller.signal).synced
    const list = async (): Promise<Slice[]> => (await client!.request<{items: Slice[]}>('GET', slicesPath, {query: {fieldSelector: `spec.nodeName=${nodeName}`}})).items
    const untainted = await waitFor('the slice without the unplugged devices', async () => {
      const [slice] = await list()
      return slice?.spec.devices?.length === 8 ? slice : undefined
    })
    expect(untainted.spec.devices?.map((d) => d.name)).to.deep.equal(
      disks(10)
        .filter((_, i) => i % 5 !== 0)
        .map((d) => d.name),
    )
    publisher.setDevices(withUnplugged(10, 2))
    await waitFor('five devices left', async () => (await list())[0]?.spec.devices?.length === 5)
    expect(log.lines.filter((l) => l.msg.includes('drops ResourceSlice device taints'))).to.have.length(1)
  })
})
