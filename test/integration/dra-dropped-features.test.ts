import {expect} from 'chai'
import {setTimeout as sleep} from 'node:timers/promises'

import {PodEvents} from '../../src/lib/agent/pod-events.js'
import {RefusalNotices} from '../../src/lib/agent/refusal-notices.js'
import {classReports} from '../../src/lib/agent/status-reporter.js'
import {StatusWriter} from '../../src/lib/agent/status-writer.js'
import {createAgentMetrics} from '../../src/lib/agent/agent-metrics.js'
import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import type {DroppedFeatures} from '../../src/lib/devices/dropped-features.js'
import type {DeviceClass} from '../../src/lib/devices/types.js'
import {DraDeviceClasses} from '../../src/lib/dra/dra-device-classes.js'
import {sliceDeviceOf} from '../../src/lib/dra/resource-slices.js'
import {SlicePublisher} from '../../src/lib/dra/slice-publisher.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {noopLogger} from '../../src/lib/observe/logger.js'
import {Registry} from 'prom-client'
import {loopDevice} from '../../harness/devices/loop-device.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient, startControlPlane} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {dropExtendedResourceNames} from '../support/dra-gates.js'

interface Condition {
  type: string
  status: string
  reason: string
  message: string
  lastTransitionTime: string
}
interface Event {
  reason: string
  message: string
  involvedObject: {kind: string; name: string; uid?: string}
}

/**
 * What the agent does with one class on a cluster: applies its resource.k8s.io DeviceClass and a slice with an
 * unplugged (tainted) device, then reports the class's status and tells what the API server dropped, as a
 * batch of `devices agent --dra` does (DraDriver.dropped() → NodeReconciler → StatusReporter, RefusalNotices).
 */
async function agentRound(client: KubeClient, name: string, nodeName: string): Promise<{dropped: DroppedFeatures; report: () => Promise<void>; stop: () => Promise<void>}> {
  await client.request('POST', deviceClassesPath, {body: deviceClassManifest(name, {allocation: 'DRA'})})
  const deviceClass = await client.request<DeviceClass>('GET', `${deviceClassesPath}/${name}`)
  const changes: string[] = []
  const classes = new DraDeviceClasses({client, logger: noopLogger, onDroppedChanged: () => changes.push('classes'), onError: () => {}})
  await classes.sync([deviceClass])
  const controller = new AbortController()
  const slices = new SlicePublisher({client, logger: noopLogger, nodeName, onError: () => {}, onTaintsDropped: () => changes.push('taints')})
  const {device} = sliceDeviceOf(loopDevice(1, {ID_SERIAL: `${name}-disk`}), [name])
  slices.setDevices([{...device, taints: [{effect: 'NoSchedule', key: 'devices.nfdctl.io/unplugged', timeAdded: '2026-12-07T22:00:00Z'}]}])
  await slices.start(controller.signal).synced
  await waitFor(
    'the slice written',
    async () => (await client.request<{items: unknown[]}>('GET', '/apis/resource.k8s.io/v1/resourceslices', {query: {fieldSelector: `spec.nodeName=${nodeName}`}})).items.length === 1,
  )
  await slices.settled()
  const dropped = {extendedResourceName: classes.extendedResourceNameDropped, taints: slices.taintsDropped}
  expect(changes.length, 'a change of what is dropped is told to the agent').to.equal(Number(dropped.extendedResourceName) + Number(dropped.taints))
  const events = new PodEvents({client, nodeName})
  const notices = new RefusalNotices({events, logger: noopLogger, metrics: createAgentMetrics(new Registry())})
  const writer = new StatusWriter(client, nodeName)
  const seen = {classes: new Map([[name, deviceClass]]), dropped, holding: new Map(), invalid: [], members: new Map()}
  return {
    dropped,
    report: async () => {
      notices.tellDropped(dropped, seen.classes)
      await writer.write(classReports(nodeName, seen))
      await events.stop()
    },
    stop: async () => {
      controller.abort()
      await slices.stop()
      await classes.stop()
      await client.request('DELETE', '/apis/resource.k8s.io/v1/resourceslices', {query: {fieldSelector: `spec.nodeName=${nodeName}`}}).catch(() => {})
      await client.request('DELETE', `${deviceClassesPath}/${name}`).catch(() => {})
    },
  }
}

const conditionsOf = async (client: KubeClient, name: string): Promise<Condition[]> =>
  (await client.request<{status?: {conditions?: Condition[]}}>('GET', `${deviceClassesPath}/${name}`)).status?.conditions ?? []
const eventsOf = async (client: KubeClient, name: string): Promise<Event[]> =>
  (await client.request<{items: Event[]}>('GET', '/api/v1/namespaces/default/events', {query: {fieldSelector: `involvedObject.name=${name},involvedObject.kind=DeviceClass`}})).items

describe('DRA classes on a kube-apiserver that drops extendedResourceName and device taints (a 1.34 or 1.35 cluster)', function () {
  let client: KubeClient | undefined
  let round: Awaited<ReturnType<typeof agentRound>> | undefined

  after(async () => {
    await round?.stop()
    client?.close()
  })

  it("the class's status says limit requests are not served and unplugged devices are not tainted, what to do, with one Event each", async function () {
    this.timeout(120_000)
    const plane = await startControlPlane(this, ['--feature-gates=DRADeviceTaints=false,DRADeviceTaintRules=false'])
    client = await plane.client()
    await dropExtendedResourceNames(client)
    round = await agentRound(client, 'gated', 'gated-node')
    expect(round.dropped).to.deep.equal({extendedResourceName: true, taints: true})
    await round.report()

    const conditions = await conditionsOf(client, 'gated')
    expect(conditions.map((c) => [c.type, c.status, c.reason])).to.deep.equal([
      ['Valid', 'True', 'SpecValid'],
      ['LimitRequestsServed', 'False', 'ExtendedResourceDropped'],
      ['UnpluggedDevicesTainted', 'False', 'DeviceTaintsDropped'],
    ])
    const limits = conditions.find((c) => c.type === 'LimitRequestsServed')!
    expect(limits.message).to.include('devices.nfdctl.io/gated').and.include('ask by ResourceClaim instead').and.include('kube-apiserver, kube-scheduler, kube-controller-manager and kubelet')

    const events = await waitFor('two Events on the class', async () => {
      const found = await eventsOf(client!, 'gated')
      return found.length === 2 ? found : undefined
    })
    expect(events.map((e) => e.reason).sort()).to.deep.equal(['DeviceTaintsDropped', 'ExtendedResourceDropped'])
    expect(events.find((e) => e.reason === 'ExtendedResourceDropped')?.message).to.equal(limits.message)

    // Once per change, not per report: the next batch writes nothing new and tells nothing again.
    await round.report()
    await sleep(500)
    expect(await eventsOf(client, 'gated')).to.have.lengthOf(2)
    expect((await conditionsOf(client, 'gated')).map((c) => c.lastTransitionTime)).to.deep.equal(conditions.map((c) => c.lastTransitionTime))
  })
})

describe('DRA classes on a kube-apiserver with its default gates (1.37)', function () {
  let client: KubeClient
  let round: Awaited<ReturnType<typeof agentRound>> | undefined

  before(async function () {
    ;({client} = await adminClient(this))
  })

  after(async () => {
    await round?.stop()
    client.close()
  })

  it('nothing is dropped: the class has only its Valid condition and no Event', async function () {
    this.timeout(60_000)
    round = await agentRound(client, 'ungated', 'ungated-node')
    expect(round.dropped).to.deep.equal({extendedResourceName: false, taints: false})
    await round.report()
    expect((await conditionsOf(client, 'ungated')).map((c) => c.type)).to.deep.equal(['Valid'])
    await sleep(500)
    expect(await eventsOf(client, 'ungated')).to.deep.equal([])
  })
})
