import {expect} from 'chai'

import {createAgentMetrics} from '../../../src/lib/agent/agent-metrics.js'
import {GrantReadiness} from '../../../src/lib/agent/grant-readiness.js'
import type {DeviceChange} from '../../../src/lib/agent/change-sources.js'
import {batchProcess, NodeAgent} from '../../../src/lib/agent/node-agent.js'
import type {ClassView} from '../../../src/lib/devices/class-view.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {Signal} from '../../../src/lib/signal.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeClaimDriver, FakePlugins, type Calls} from '../../support/fake-agent-parts.js'

const view = (...names: string[]): ClassView => ({applicable: names.map((n) => deviceClass(n)), invalid: []})

/** NodeAgent over recording parts; every part writes into one list of calls, so their order shows. */
function agentOf(options: {dra?: boolean} = {}) {
  const calls: Calls = []
  const changes = new Signal<string>()
  const containerChanges = new Signal<string>()
  const deviceChanges = new Signal<DeviceChange>()
  const batches: string[] = []
  const lane = {
    admissionChanges: 0,
    applied: [] as string[][],
    /** While set, a lane run ends only once it settles. */
    running: undefined as Promise<void> | undefined,
    admissionChanged: () => void lane.admissionChanges++,
    applyDevices: async (classes: ReadonlySet<string>) => {
      lane.applied.push([...classes])
      await lane.running
      return 0
    },
  }
  let classListener: ((view: ClassView) => void) | undefined
  const store = {
    view: view('a'),
    onChange: (listener: (view: ClassView) => void): void => {
      classListener = listener
    },
    start: async () => {
      calls.push('classes.start')
      return {source: 'cluster' as const, view: store.view}
    },
    stop: async () => void calls.push('classes.stop'),
  }
  const sources = {
    waitingFor: 'pods not listed yet' as string | undefined,
    notReady: () => sources.waitingFor,
    start: async () => void calls.push('sources.start'),
    follow: () => void calls.push('sources.follow'),
    stop: async () => void calls.push('sources.stop'),
  }
  const remembered: Device[][] = []
  const members = {
    remember: (devices: Iterable<Device>) => void remembered.push([...devices]),
    setClasses: (classes: readonly {metadata: {name: string}}[]) => void calls.push(`members.setClasses ${classes.map((c) => c.metadata.name).join(',')}`),
  }
  const plugins = new FakePlugins(calls)
  const dra = options.dra ? new FakeClaimDriver(calls) : undefined
  const supervisor = {readiness: {ready: true, reason: 'up: uevents, containerd'}, status: () => supervisor.readiness}
  const grantHealth = new GrantReadiness(noopLogger)
  const agent = new NodeAgent({
    afterBatches: [{stop: () => void calls.push('events.stop')}, {stop: async () => void calls.push('status.stop')}],
    batcher: {add: (what) => void batches.push(what), stop: async () => void calls.push('batcher.stop')},
    changes,
    classStore: store,
    containerChanges,
    deviceChanges,
    dra,
    grantHealth,
    grants: {load: async () => void calls.push('grants.load')},
    lane,
    logger: noopLogger,
    members,
    metrics: createAgentMetrics(new Registry()),
    nodeName: 'n1',
    owned: {devices: () => [loopDevice(3)], load: async () => void calls.push('owned.load')},
    plugins,
    sources,
    startSweep: async () => void calls.push('startSweep'),
    supervisor,
  })
  return {
    agent,
    batches,
    calls,
    changes,
    classChanged: (v: ClassView) => classListener?.(v),
    containerChanges,
    deviceChanges,
    dra,
    grantHealth,
    lane,
    plugins,
    remembered,
    sources,
    supervisor,
  }
}

describe('NodeAgent: the parts started, stopped and asked in order', function () {
  it('starts the records, the devices and the start sweep before the classes (the API server), then the plugins and DRA, follows the cluster and runs a first batch', async function () {
    const a = agentOf({dra: true})
    await a.agent.start(new AbortController().signal)
    expect(a.calls).to.deep.equal([
      'grants.load',
      'owned.load',
      'sources.start',
      'startSweep',
      'classes.start',
      'members.setClasses a',
      'plugins.classesChanged',
      'dra.classesChanged',
      'plugins.start',
      'dra.start',
      'sources.follow',
    ])
    expect(
      a.remembered.map((ds) => ds.map((d) => d.id)),
      'owned numbers remembered before the first scan',
    ).to.deep.equal([['b7:3']])
    expect(a.batches).to.deep.equal(['start'])
  })

  it('stops the sources first and the servers last; what the batches write stops after the batcher', async function () {
    const a = agentOf({dra: true})
    await a.agent.start(new AbortController().signal)
    a.calls.length = 0
    await a.agent.stop()
    expect(a.calls).to.deep.equal(['sources.stop', 'classes.stop', 'batcher.stop', 'events.stop', 'status.stop', 'plugins.stop', 'dra.stop'])
  })

  it('turns every change (a claim prepared, a class edited) into a batch while it runs, and none once stopped', async function () {
    const a = agentOf({dra: true})
    a.changes.emit('claims changed')
    expect(a.batches, 'not started yet').to.deep.equal([])
    await a.agent.start(new AbortController().signal)
    a.changes.emit('claims changed')
    a.calls.length = 0
    a.classChanged(view('a', 'b'))
    expect(a.calls).to.deep.equal(['members.setClasses a,b', 'plugins.classesChanged', 'dra.classesChanged'])
    await a.agent.stop()
    a.changes.emit('claims changed')
    expect(a.batches).to.deep.equal(['start', 'claims changed', 'classes changed'])
  })

  it('gives a device change to the device lane before its batch; only changes of who may hold what (not devices, not containers) make the lane wait for a new plan', async function () {
    const a = agentOf()
    await a.agent.start(new AbortController().signal)
    a.deviceChanges.emit({classes: new Set(['a']), what: 'device add loop2'})
    a.containerChanges.emit('/tasks/start')
    expect(a.lane.applied).to.deep.equal([['a']])
    expect(a.lane.admissionChanges).to.equal(0)
    a.changes.emit('pod ns/p')
    a.classChanged(view('a', 'b'))
    expect(a.lane.admissionChanges).to.equal(2)
    expect(a.batches).to.deep.equal(['start', 'device add loop2', '/tasks/start', 'pod ns/p', 'classes changed'])
  })

  it('stops what the batches write only once the device lane has finished too', async function () {
    const a = agentOf()
    await a.agent.start(new AbortController().signal)
    let finish = (): void => {}
    a.lane.running = new Promise((resolve) => (finish = resolve))
    a.deviceChanges.emit({classes: new Set(['a']), what: 'device add loop2'})
    a.calls.length = 0
    const stopped = a.agent.stop()
    await new Promise((resolve) => setImmediate(resolve))
    expect(a.calls).to.deep.equal(['sources.stop', 'classes.stop', 'batcher.stop'])
    finish()
    await stopped
    expect(a.calls.slice(3, 5)).to.deep.equal(['events.stop', 'status.stop'])
  })

  it('is ready when the pods are listed and every part is; the reason names what is not', async function () {
    const a = agentOf({dra: true})
    expect(a.agent.status()).to.deep.equal({ready: false, reason: 'pods not listed yet'})
    a.sources.waitingFor = undefined
    expect(a.agent.status()).to.deep.equal({ready: true, reason: 'up: uevents, containerd; plugins registered; DRA plugin registered'})
    a.dra!.readiness = {ready: false, reason: 'DRA plugin not registered'}
    a.supervisor.readiness = {ready: false, reason: 'containerd down since 10:00'}
    expect(a.agent.status()).to.deep.equal({ready: false, reason: 'containerd down since 10:00; DRA plugin not registered'})
    for (let i = 0; i < 3; i++) a.grantHealth.batchDone({failed: 1, lastError: 'EPERM', succeeded: 0})
    expect(a.agent.status().reason).to.match(/^grants failing: .* the last error: EPERM; containerd down/)
  })
})

describe('batchProcess: what one batch does', function () {
  function parts(listed: boolean, failure?: Error) {
    const calls: Calls = []
    const dra = new FakeClaimDriver(calls)
    const process = batchProcess({
      dra,
      metrics: createAgentMetrics(new Registry()),
      reconciler: {
        reconcile: async () => {
          calls.push('reconcile')
          if (failure !== undefined) throw failure
        },
      },
      sources: {listed},
      trim: {afterWork: () => void calls.push('trim')},
    })
    return {calls, process}
  }

  it('reconciles once the pods are listed, then trims and lets the DRA driver write', async function () {
    const p = parts(true)
    await p.process(['start', 'device add loop1'])
    expect(p.calls).to.deep.equal(['reconcile', 'trim', 'dra.flush'])
  })

  it('before the first lists, reconciles nothing (an empty pod list would take every device away) but still flushes', async function () {
    const p = parts(false)
    await p.process(['start'])
    expect(p.calls).to.deep.equal(['dra.flush'])
  })

  it('a failed reconcile fails the batch, and the DRA driver still writes', async function () {
    const p = parts(true, new Error('cannot list containerd’s containers'))
    let thrown: unknown
    await p.process(['start']).catch((error: unknown) => (thrown = error))
    expect((thrown as Error | undefined)?.message).to.equal('cannot list containerd’s containers')
    expect(p.calls).to.deep.equal(['reconcile', 'dra.flush'])
  })
})
