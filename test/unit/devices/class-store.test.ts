import {expect} from 'chai'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {ClassItem} from '../../../src/lib/devices/class-informers.js'
import {ClassStateFile} from '../../../src/lib/devices/class-state-file.js'
import {ClassStore} from '../../../src/lib/devices/class-store.js'
import type {ClassView} from '../../../src/lib/devices/class-view.js'
import {deviceClassesPath} from '../../../src/lib/devices/cluster-classes.js'
import type {ObjectMeta} from '../../../src/lib/kube/resource.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeApiClient} from '../../support/fake-api-client.js'
import {FakeInformer, metaKey} from '../../support/fake-informer.js'
import {settle, VirtualTimers} from '../../support/virtual-timers.js'

const item = (name: string, generation: number, spec?: object): ClassItem => ({metadata: {generation, name, uid: `uid-${name}`}, spec})
const loops = (glob: string, extra: object = {}): object => ({match: [{devName: glob, subsystem: 'block'}], ...extra})
const names = (view: ClassView): string[] => view.applicable.map((c) => c.metadata.name)

describe('ClassStore: the node’s classes, from the cluster or the copy under --state-dir', function () {
  let dir: string
  const controller = new AbortController()
  const stores: ClassStore[] = []

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-class-store-'))
  })

  afterEach(async function () {
    for (const store of stores.splice(0)) await store.stop()
    await rm(dir, {force: true, recursive: true})
  })

  after(() => controller.abort())

  function storeOf(stateDir = dir) {
    const classes = new FakeInformer<ClassItem>(metaKey)
    const node = new FakeInformer<ObjectMeta>((n) => n.name)
    const client = new FakeApiClient()
    const persisted = new ClassStateFile({logger: noopLogger, nodeName: 'n1', stateDir})
    const timers = new VirtualTimers()
    const store = new ClassStore({classes, client, fileClasses: [], logger: noopLogger, node, nodeName: 'n1', persisted, retryTimers: timers, startGraceMs: 20})
    stores.push(store)
    const views: ClassView[] = []
    store.onChange((view) => views.push(view))
    return {classes, client, node, persisted, store, timers, views}
  }

  it('serves the persisted classes when the API server does not answer at start, and the cluster’s once it does', async function () {
    const saved = new ClassStateFile({logger: noopLogger, nodeName: 'n1', stateDir: dir})
    saved.write([deviceClass('saved', loops('loop1*'))], {})
    await saved.settled()
    const s = storeOf()
    const started = await s.store.start(controller.signal)
    expect(started.source).to.equal('state-dir')
    expect(names(started.view)).to.deep.equal(['saved'])
    expect(s.store.synced).to.equal(false)
    s.classes.list([item('live', 1, loops('loop2*'))])
    s.node.list([{labels: {}, name: 'n1', uid: 'node-uid'}])
    await settle()
    expect(s.views.map(names)).to.deep.equal([['live']])
    expect(s.store.synced).to.equal(true)
    await s.persisted.settled()
    expect(
      (await s.persisted.read())?.classes.map((c) => c.metadata.name),
      'the cluster’s classes persisted in their place',
    ).to.deep.equal(['live'])
  })

  it('waits for the API server when nothing is persisted', async function () {
    const s = storeOf(join(dir, 'empty'))
    let started: Awaited<ReturnType<ClassStore['start']>> | undefined
    const starting = s.store.start(controller.signal).then((result) => (started = result))
    await new Promise((resolve) => setTimeout(resolve, 40))
    expect(started, 'past the grace period, still waiting').to.equal(undefined)
    s.classes.list([item('live', 1, loops('loop2*'))])
    s.node.list([{name: 'n1', uid: 'node-uid'}])
    await starting
    expect(started?.source).to.equal('cluster')
    expect(names(started!.view)).to.deep.equal(['live'])
  })

  it('reads an edited class with one GET; a failed read keeps the previous spec and is tried again after a back-off', async function () {
    const s = storeOf()
    s.classes.list([item('a', 1, loops('loop1*'))])
    s.node.list([{name: 'n1', uid: 'node-uid'}])
    await s.store.start(controller.signal)
    // A status write keeps the generation: nothing to read.
    s.classes.change(item('a', 1))
    await settle()
    expect(s.client.requests).to.deep.equal([])
    const path = `${deviceClassesPath}/a`
    s.client.fail('GET', path, 500)
    s.client.answer('GET', path, item('a', 2, loops('loop1*', {permissions: 'r'})))
    s.classes.change(item('a', 2))
    await settle()
    expect(s.client.requests).to.deep.equal([`GET ${path}`])
    expect(
      s.store.view.applicable.map((c) => [c.metadata.generation, c.spec.permissions]),
      'the previous spec stays',
    ).to.deep.equal([[1, 'rw']])
    await s.timers.advanceTo(1999)
    expect(s.client.requests, 'not before the back-off').to.have.length(1)
    await s.timers.advanceTo(2000)
    expect(s.client.requests).to.have.length(2)
    expect(s.store.view.applicable.map((c) => [c.metadata.generation, c.spec.permissions])).to.deep.equal([[2, 'r']])
    expect(s.views.map((v) => v.applicable[0]?.spec.permissions)).to.deep.equal(['r'])
  })

  it('does not read again a class that is gone (404)', async function () {
    const s = storeOf()
    s.classes.list([item('a', 1, loops('loop1*'))])
    s.node.list([{name: 'n1', uid: 'node-uid'}])
    await s.store.start(controller.signal)
    s.client.fail('GET', `${deviceClassesPath}/a`, 404)
    s.classes.change(item('a', 2))
    await settle()
    await s.timers.advanceTo(60_000)
    expect(s.timers.pending).to.equal(0)
    expect(s.client.requests).to.have.length(1)
  })
})
