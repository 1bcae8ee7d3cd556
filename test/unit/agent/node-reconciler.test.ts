import {expect} from 'chai'

import {createAgentMetrics} from '../../../src/lib/agent/agent-metrics.js'
import type {NodePod} from '../../../src/lib/agent/container-access.js'
import type {BatchOutcome} from '../../../src/lib/agent/grant-health.js'
import {GrantReadiness} from '../../../src/lib/agent/grant-readiness.js'
import {NodeReconciler} from '../../../src/lib/agent/node-reconciler.js'
import type {NodeClassesSeen} from '../../../src/lib/agent/status-reporter.js'
import {ClassMembers} from '../../../src/lib/devices/class-members.js'
import {ownedId, type OwnedDevice} from '../../../src/lib/devices/owned-devices.js'
import type {ClassView} from '../../../src/lib/devices/class-view.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeApplier, FakeClaimDriver} from '../../support/fake-agent-parts.js'
import {FakeContainerd} from '../../support/fake-containerd.js'
import {FakePodResources} from '../../support/fake-pod-resources.js'

const low = deviceClass('low', {match: [{devName: 'loop[0-4]', subsystem: 'block'}]})
const disk = deviceClass('disk', {allocation: 'DRA', match: [{devName: 'loop[5-9]', subsystem: 'block'}]})

function podOf(name: string, options: {limits?: Record<string, string>; hasClaims?: boolean} = {}): NodePod {
  return {
    metadata: {name, namespace: 'ns', uid: `uid-${name}`},
    spec: {containers: [{name: 'app', resources: {limits: options.limits ?? {}}}], hasClaims: options.hasClaims},
    status: {phase: 'Running'},
  }
}
const ref = (name: string) => ({name, namespace: 'ns', uid: `uid-${name}`})

/** OwnedDevices in memory. */
class FakeOwned {
  readonly devices = new Map<string, OwnedDevice>()
  generation = 0
  get = (id: string): OwnedDevice | undefined => this.devices.get(id)
  all = (): OwnedDevice[] => [...this.devices.values()]
  set(d: OwnedDevice): void {
    this.devices.set(ownedId(d), d)
  }
  async forget(keep: (d: OwnedDevice) => boolean): Promise<void> {
    for (const [id, d] of this.devices) if (!keep(d)) this.devices.delete(id)
    this.generation++
  }
}

/** A node of one or two classes, pods, containerd's containers and kubelet's allocations, all set by the test. */
function node(options: {dra?: FakeClaimDriver} = {}) {
  const pods = new Map<string, NodePod>()
  const containerd = new FakeContainerd()
  const kubelet = new FakePodResources()
  const applier = new FakeApplier()
  const members = new ClassMembers(() => undefined, [low, disk])
  for (const minor of [1, 2, 6]) members.deviceEvent('add', loopDevice(minor))
  const reports: NodeClassesSeen[] = []
  const outcomes: BatchOutcome[] = []
  const view: ClassView = {applicable: [low, disk], invalid: []}
  const health = new GrantReadiness(noopLogger)
  const registry = new Registry()
  const {dra} = options
  /** While set, containerd's list answers only once it settles (a list that takes long while pods start). */
  let listing: Promise<void> | undefined
  const holdList = (): (() => void) => {
    let release = (): void => {}
    listing = new Promise((resolve) => (release = resolve))
    return () => {
      listing = undefined
      release()
    }
  }
  const owned = new FakeOwned()
  const reconciler = new NodeReconciler({
    claimed: dra === undefined ? undefined : (c) => dra.claimed(c),
    dropped: dra === undefined ? undefined : () => dra.dropped(),
    classes: () => view,
    containers: async () => {
      await listing
      return containerd.connected ? {containers: await containerd.containers([]), running: containerd.running, touchedAt: (id) => containerd.touchedAt(id)} : undefined
    },
    logger: noopLogger,
    members,
    metrics: createAgentMetrics(registry),
    namespaceLabels: () => ({}),
    nodeName: 'n1',
    owned,
    notices: {tell: () => {}, tellDevices: () => {}, tellDropped: () => {}, tellRuntime: () => {}},
    outcome: (outcome) => {
      outcomes.push(outcome)
      health.batchDone(outcome)
    },
    podResources: kubelet.list,
    pods: () => pods.values(),
    reconciler: applier,
    status: {report: (seen) => reports.push(seen)},
    workers: 2,
  })
  const batch = async (): Promise<void> => {
    applier.nextBatch()
    await reconciler.reconcile()
  }
  const addPod = (pod: NodePod): void => void pods.set(pod.metadata.name, pod)
  return {addPod, applier, batch, containerd, health, holdList, kubelet, members, outcomes, owned, reconciler, registry, reports}
}

describe('NodeReconciler: one batch, gathered, planned and applied', function () {
  it('gives a container asking by limit what kubelet allocated, and reports the class held', async function () {
    const n = node()
    n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.containerd.run('c1', ref('a'), 'app')
    n.kubelet.allocate(ref('a'), 'app', 'devices.nfdctl.io/low', ['id-1'])
    await n.batch()
    expect(n.applier.last).to.deep.equal([{allocated: {low: ['id-1']}, classes: ['low'], container: 'c1'}])
    expect([...n.applier.retained]).to.deep.equal(['c1'])
    expect(n.kubelet.calls).to.equal(1)
    expect(n.outcomes).to.deep.equal([{failed: 0, succeeded: 1}])
    expect(n.reports).to.have.length(1)
    expect(n.reports[0].holding.get('low')).to.equal(1)
    expect(n.reports[0].members.get('low')?.map((d) => d.id)).to.deep.equal(['b7:1', 'b7:2'])
  })

  it("reports what the DRA driver says the API server drops (nothing without the driver), for the classes' status", async function () {
    const dra = new FakeClaimDriver()
    dra.droppedFeatures = {extendedResourceName: true, taints: false}
    const n = node({dra})
    await n.batch()
    expect(n.reports.at(-1)?.dropped).to.deep.equal({extendedResourceName: true, taints: false})
    const without = node()
    await without.batch()
    expect(without.reports.at(-1)?.dropped).to.deep.equal({extendedResourceName: false, taints: false})
  })

  it('does nothing while containerd is away: no allocation read, no apply, no report', async function () {
    const n = node()
    n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.containerd.connected = false
    await n.batch()
    expect([n.applier.last, n.kubelet.calls, n.reports.length, n.outcomes.length]).to.deep.equal([[], 0, 0, 0])
  })

  it("reads kubelet's allocations only when a container asks by limit", async function () {
    const n = node()
    n.addPod(podOf('a'))
    n.containerd.run('c1', ref('a'), 'app')
    await n.batch()
    expect(n.kubelet.calls).to.equal(0)
    expect(
      n.applier.last.map((a) => a.container),
      'the first batch looks at every container',
    ).to.deep.equal(['c1'])
  })

  it('leaves a container asking by limit as it is while PodResources does not answer, its unit still counted', async function () {
    const n = node()
    n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.containerd.run('c1', ref('a'), 'app')
    n.kubelet.failure = new Error('connection refused')
    await n.batch()
    expect(n.applier.last).to.deep.equal([])
    expect(n.reports[0].holding.get('low')).to.equal(1)
    expect(await n.registry.metrics()).to.include('nfdctl_agent_errors_total{kind="pod-resources"} 1')
  })

  it('looks again only at containers that ask or may still hold: one found holding nothing is not handed over again', async function () {
    const n = node()
    n.addPod(podOf('idle'))
    n.addPod(podOf('kept'))
    n.addPod(podOf('asks', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.containerd.run('c-idle', ref('idle'), 'app')
    n.containerd.run('c-kept', ref('kept'), 'app')
    n.containerd.run('c-asks', ref('asks'), 'app')
    n.kubelet.allocate(ref('asks'), 'app', 'devices.nfdctl.io/low', ['id-1'])
    n.applier.holding.add('c-kept') // a revoke that did not go through: it still holds a class device
    await n.batch()
    expect(n.applier.last.map((a) => a.container).sort()).to.deep.equal(['c-asks', 'c-idle', 'c-kept'])
    await n.batch()
    expect(n.applier.last.map((a) => a.container).sort()).to.deep.equal(['c-asks', 'c-kept'])
  })

  it('reports a failing apply, and looks at that container again in the next batch', async function () {
    const n = node()
    // Its pod asks for nothing (any more): only the first batch looks at it, unless the look fails.
    n.addPod(podOf('a'))
    n.containerd.run('c1', ref('a'), 'app')
    n.applier.failing.set('c1', new Error('devices.allow: permission denied'))
    await n.batch()
    expect(n.outcomes).to.deep.equal([{failed: 1, lastError: 'devices.allow: permission denied', succeeded: 0}])
    n.applier.failing.clear()
    await n.batch()
    expect(n.applier.last).to.deep.equal([{allocated: {}, classes: [], container: 'c1'}])
    await n.batch()
    expect(n.applier.last, 'brought to its plan, holding nothing: left alone').to.deep.equal([])
  })

  it('makes grants not ready after three batches in a row where every container failed, and ready after one succeeds', async function () {
    const n = node()
    n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.containerd.run('c1', ref('a'), 'app')
    n.kubelet.allocate(ref('a'), 'app', 'devices.nfdctl.io/low', ['id-1'])
    n.applier.failing.set('c1', new Error('EPERM'))
    await n.batch()
    await n.batch()
    expect(n.health.problem()).to.equal(undefined)
    await n.batch()
    expect(n.health.problem()).to.equal('grants failing: no container could be changed in 3 batches in a row, the last error: EPERM')
    n.applier.failing.clear()
    await n.batch()
    expect(n.health.problem()).to.equal(undefined)
  })

  it("asks the DRA driver only about containers of pods with claims, and gives them the claim's devices", async function () {
    const dra = new FakeClaimDriver()
    const n = node({dra})
    n.addPod(podOf('claims', {hasClaims: true}))
    n.addPod(podOf('plain'))
    n.containerd.run('c-claims', ref('claims'), 'app')
    n.containerd.run('c-plain', ref('plain'), 'app')
    dra.claims.set('c-claims', new Map([['disk', ['id-6']]]))
    dra.claims.set('c-plain', new Map([['disk', ['id-6']]])) // a container of a pod without claims holds none, whatever its spec says
    await n.batch()
    const byId = new Map(n.applier.last.map((a) => [a.container, a]))
    expect(byId.get('c-claims')).to.deep.equal({allocated: {disk: ['id-6']}, classes: ['disk'], container: 'c-claims'})
    expect(byId.get('c-plain')?.classes).to.deep.equal([])
  })

  it('forgets the owned numbers no class has a device at and no container holds by a class it was given them for', async function () {
    const n = node()
    const number = (minor: number, classes: string[], major = 7, type: 'b' | 'c' = 'b'): OwnedDevice => ({classes, devNode: `/dev/x${minor}`, major, minor, type})
    for (const d of [number(1, ['low']), number(3, ['low']), number(4, ['low']), number(3, ['nulls'], 1, 'c'), number(8, ['disk'])]) n.owned.set(d)
    n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
    n.addPod(podOf('b'))
    n.addPod(podOf('c', {hasClaims: true}))
    const nodes = (...ids: Array<[string, number, number]>) => ({linux: {devices: ids.map(([type, major, minor]) => ({major, minor, path: `/dev/n${minor}`, type}))}})
    // Held by limit (kubelet put loop3 there), by a pod that asks for nothing (loop4 and /dev/null: another plugin's, the runtime's), by claim.
    Object.assign(n.containerd.run('c-a', ref('a'), 'app'), {spec: nodes(['b', 7, 3], ['c', 1, 3])})
    Object.assign(n.containerd.run('c-b', ref('b'), 'app'), {spec: nodes(['b', 7, 4], ['c', 1, 3])})
    const dra = n.containerd.run('c-c', ref('c'), 'app')
    Object.assign(dra, {spec: nodes(['b', 7, 8])})
    n.kubelet.allocate(ref('a'), 'app', 'devices.nfdctl.io/low', ['id-1'])
    await n.batch()
    expect([...n.owned.devices.keys()].sort(), 'without a DRA driver the claim explains nothing').to.deep.equal(['b7:1', 'b7:3'])
  })

  it('keeps the number a container holds by claim', async function () {
    const driver = new FakeClaimDriver()
    const n = node({dra: driver})
    n.owned.set({classes: ['disk'], devNode: '/dev/loop8', major: 7, minor: 8, type: 'b'})
    n.addPod(podOf('c', {hasClaims: true}))
    Object.assign(n.containerd.run('c-c', ref('c'), 'app'), {spec: {linux: {devices: [{major: 7, minor: 8, path: '/dev/loop8', type: 'b'}]}}})
    driver.claims.set('c-c', new Map([['disk', ['id-8']]]))
    await n.batch()
    expect([...n.owned.devices.keys()]).to.deep.equal(['b7:8'])
    driver.claims.delete('c-c')
    await n.batch()
    expect([...n.owned.devices.keys()]).to.deep.equal([])
  })

  describe('the device lane: a class device event applied ahead of the batch queue', function () {
    /** A node whose first batch gave c-low (asking for low by limit) its plan; c-none asks for nothing. */
    async function planned() {
      const n = node()
      n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
      n.addPod(podOf('b'))
      n.containerd.run('c-low', ref('a'), 'app', 1001)
      n.containerd.run('c-none', ref('b'), 'app', 1002)
      n.kubelet.allocate(ref('a'), 'app', 'devices.nfdctl.io/low', ['id-1'])
      await n.batch()
      n.applier.given.length = 0
      return n
    }

    it("gives the new members to the containers asking for the device's class while a batch waits for containerd's list", async function () {
      const n = await planned()
      const release = n.holdList()
      const batch = n.batch()
      n.members.deviceEvent('add', loopDevice(3))
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(1)
      expect(n.applier.given, 'the batch still waits for the list').to.deep.equal([{container: 'c-low', devices: {disk: ['b7:6'], low: ['b7:1', 'b7:2', 'b7:3']}, generation: n.members.generation}])
      release()
      await batch
      expect(n.applier.given.map((g) => g.container).slice(1), 'the batch looks again').to.deep.equal(['c-low'])
    })

    it('does nothing before the first plan, nor for a class no planned container asks for', async function () {
      const n = node()
      n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
      n.containerd.run('c-low', ref('a'), 'app', 1001)
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
      n.kubelet.allocate(ref('a'), 'app', 'devices.nfdctl.io/low', ['id-1'])
      await n.batch()
      expect(await n.reconciler.applyDevices(new Set(['disk']))).to.equal(0)
    })

    it('waits for a plan made after a change of who may hold what (a pod, a namespace, a class, a claim)', async function () {
      const n = await planned()
      n.reconciler.admissionChanged()
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
      // A change during the gather (after the pods were read) is not in that plan either.
      const release = n.holdList()
      const batch = n.batch()
      n.reconciler.admissionChanged()
      release()
      await batch
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
      await n.batch()
      n.applier.given.length = 0
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(1)
      expect(n.applier.given.map((g) => g.container)).to.deep.equal(['c-low'])
    })

    it('leaves a container whose process is not the planned one (restarted, or exited) to the batch', async function () {
      const n = await planned()
      n.containerd.running.set('c-low', 2001)
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
      n.containerd.running.delete('c-low')
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
      expect(n.applier.given).to.deep.equal([])
    })

    it('leaves a container asking by limit whose allocation could not be told to the batch', async function () {
      const n = node()
      n.addPod(podOf('a', {limits: {'devices.nfdctl.io/low': '1'}}))
      n.containerd.run('c-low', ref('a'), 'app', 1001)
      n.kubelet.failure = new Error('connection refused')
      await n.batch()
      expect(await n.reconciler.applyDevices(new Set(['low']))).to.equal(0)
    })
  })
})
