import {expect} from 'chai'

import {ChangeSources, deviceFeed, type DeviceChange} from '../../../src/lib/agent/change-sources.js'
import {criLabels, type NodePod} from '../../../src/lib/agent/container-access.js'
import {ClassMembers} from '../../../src/lib/devices/class-members.js'
import type {ObjectMeta} from '../../../src/lib/kube/resource.js'
import {Signal} from '../../../src/lib/signal.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeClaimDriver, FakeDeviceWatcher, FakePlugins, FakeReport, type Calls} from '../../support/fake-agent-parts.js'
import {FakeContainerd} from '../../support/fake-containerd.js'
import {FakeInformer, metaKey} from '../../support/fake-informer.js'

const pod = (name: string, limits: Record<string, string> = {}, uid = `uid-${name}`): NodePod => ({
  metadata: {name, namespace: 'ns', uid},
  spec: {containers: [{name: 'app', resources: {limits}}]},
  status: {phase: 'Running'},
})

function sources(calls: Calls = []) {
  const changes = new Signal<string>()
  const deviceChanges = new Signal<DeviceChange>()
  const changed: string[] = []
  const devicesChanged: Array<[string, string[]]> = []
  changes.listen((what) => changed.push(what))
  deviceChanges.listen(({classes, what}) => devicesChanged.push([what, [...classes]]))
  const members = new ClassMembers(() => undefined, [deviceClass('low', {match: [{devName: 'loop[0-4]', subsystem: 'block'}]})])
  const watcher = new FakeDeviceWatcher([loopDevice(1)], calls)
  const devices = deviceFeed(() => watcher)
  const pods = new FakeInformer<NodePod>(metaKey)
  const namespaces = new FakeInformer<ObjectMeta>((ns) => ns.name)
  const containerd = new FakeContainerd()
  const plugins = new FakePlugins(calls)
  const dra = new FakeClaimDriver(calls)
  const uevents = new FakeReport()
  const hostChanged = new Signal<ReadonlySet<string>>()
  const mounts = {start: () => calls.push('mounts.start'), stop: () => calls.push('mounts.stop')}
  const built = new ChangeSources({changes, containerd, deviceChanges, devices, dra, hostChanged, members, mounts, namespaces, plugins, pods, uevents})
  return {built, changed, containerd, devices, devicesChanged, dra, hostChanged, members, namespaces, plugins, pods, uevents, watcher}
}

describe('ChangeSources: what can change a container’s access, routed', function () {
  it('a device event of a class goes to the members, the plugins, the DRA driver and the device changes with its classes; one in no class changes no container', async function () {
    const s = sources()
    await s.built.start(new AbortController().signal)
    expect(
      s.members.of('low').map((d) => d.id),
      'the initial scan is placed',
    ).to.deep.equal(['b7:1'])
    expect(s.uevents.said).to.deep.equal(['up'])
    s.devices.events.emit({action: 'add', device: loopDevice(2)})
    s.devices.events.emit({action: 'add', device: loopDevice(9)})
    expect(s.devicesChanged).to.deep.equal([['device add loop2', ['low']]])
    expect(s.changed, 'who may hold what is the same').to.deep.equal([])
    expect(s.plugins.published).to.deep.equal([['low'], []])
    expect(s.dra.devicesChangedWith).to.deep.equal([['low'], []])
    expect(s.members.of('low').map((d) => d.id)).to.deep.equal(['b7:1', 'b7:2'])
  })

  it("the node's mounts: followed from start, before the scan, until stop; a change of what a class serves goes to the device changes and the DRA driver", async function () {
    const calls: Calls = []
    const s = sources(calls)
    await s.built.start(new AbortController().signal)
    expect(calls.slice(0, 2)).to.deep.equal(['mounts.start', 'devices.start'])
    s.hostChanged.emit(new Set())
    s.hostChanged.emit(new Set(['low']))
    expect(s.devicesChanged, 'none when no class serves otherwise').to.deep.equal([["the node's mounts changed", ['low']]])
    expect(s.dra.devicesChangedWith).to.deep.equal([['low']])
    await s.built.stop()
    expect(calls).to.include('mounts.stop')
  })

  it('a failure of the uevent socket is told to its report (the supervisor reopens it)', function () {
    const s = sources()
    s.devices.failures.emit(new Error('ENOBUFS'))
    expect(s.uevents.said).to.deep.equal(['failed: ENOBUFS'])
  })

  it('pods: a relist, a new pod, a change of what a pod asks and a deletion are changes; a status update is not', function () {
    const s = sources()
    s.pods.list([pod('a')])
    s.pods.change(pod('b', {'devices.nfdctl.io/low': '1'}))
    s.pods.change({...pod('b', {'devices.nfdctl.io/low': '1'}), status: {phase: 'Succeeded'}})
    s.pods.change(pod('b'))
    s.pods.change(pod('b', {}, 'uid-b2'))
    s.pods.remove(pod('b', {}, 'uid-b2'))
    expect(s.changed).to.deep.equal(['pods relisted', 'pod ns/b', 'pod ns/b', 'pod ns/b', 'pod ns/b deleted'])
  })

  it('namespaces: only a change of labels, a relist or a deletion is a change', function () {
    const s = sources()
    s.namespaces.list([{labels: {team: 'a'}, name: 'ns', uid: 'u'}])
    s.namespaces.change({labels: {team: 'a'}, name: 'ns', resourceVersion: '2', uid: 'u'})
    s.namespaces.change({labels: {team: 'b'}, name: 'ns', uid: 'u'})
    s.namespaces.remove({name: 'ns', uid: 'u'})
    expect(s.changed).to.deep.equal(['namespace list', 'namespace ns', 'namespace ns deleted'])
    expect(s.built.namespaceLabels('ns')).to.equal(undefined)
  })

  it('is listed once pods and namespaces are, and says which one it waits for', function () {
    const s = sources()
    expect(s.built.listed).to.equal(false)
    expect(s.built.notReady()).to.equal('pods not listed yet')
    s.pods.list([])
    expect(s.built.notReady()).to.equal('namespaces not listed yet')
    s.namespaces.list([{name: 'ns', uid: 'u'}])
    expect(s.built.listed).to.equal(true)
    expect(s.built.notReady()).to.equal(undefined)
    expect(s.built.namespaceLabels('ns'), 'a namespace without labels').to.deep.equal({})
  })

  it('lists workload containers only while containerd is connected', async function () {
    const s = sources()
    s.containerd.run('c1', {name: 'a', namespace: 'ns', uid: 'uid-a'}, 'app', 42)
    s.containerd.connected = false
    expect(await s.built.containers()).to.equal(undefined)
    expect(s.containerd.lists).to.have.length(0)
    s.containerd.connected = true
    const listed = await s.built.containers()
    expect(listed?.containers.map((c) => c.id)).to.deep.equal(['c1'])
    expect(listed?.running.get('c1')).to.equal(42)
    expect(s.containerd.lists).to.deep.equal([[`labels."${criLabels.kind}"==container`]])
  })

  it('starts the devices first, follows the API server and containerd after, and stops them all', async function () {
    const calls: Calls = []
    const s = sources(calls)
    const controller = new AbortController()
    await s.built.start(controller.signal)
    expect(s.pods.started + s.namespaces.started + s.containerd.started, 'nothing but mounts and devices in start()').to.equal(0)
    s.built.follow(controller.signal)
    expect([s.pods.started, s.namespaces.started, s.containerd.started]).to.deep.equal([1, 1, 1])
    controller.abort()
    await s.built.stop()
    expect([s.pods.stopped, s.namespaces.stopped, s.containerd.stopped]).to.deep.equal([1, 1, 1])
    expect(calls).to.deep.equal(['mounts.start', 'devices.start', 'devices.stop', 'mounts.stop'])
  })
})
