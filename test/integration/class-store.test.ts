import {expect} from 'chai'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {followClusterClasses} from '../../src/lib/devices/class-informers.js'
import {ClassStateFile} from '../../src/lib/devices/class-state-file.js'
import {ClassStore} from '../../src/lib/devices/class-store.js'
import type {ClassView} from '../../src/lib/devices/class-view.js'
import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {createLogger} from '../../src/lib/observe/logger.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {DroppingProxy} from '../support/dropping-proxy.js'
import {sink, type Sink} from '../support/sink.js'

const node = 'cs-node'
const loopRule = (glob: string): Record<string, unknown> => ({match: [{devName: glob, subsystem: 'block'}]})
/** The store's log, one record per line. */
const records = (log: Sink): Array<{msg: string; classes?: string[]}> => log.lines().map((line) => JSON.parse(line))

describe("the agent's class store on a real API server", function () {
  let plane: ControlPlane
  let client: KubeClient
  let dir: string
  const stores: ClassStore[] = []
  const controllers: AbortController[] = []
  const created: string[] = []

  const storeFor = (storeClient: KubeClient, stateDir: string, out = sink()): ClassStore => {
    const logger = createLogger({format: 'json', level: 'info', out})
    const persisted = new ClassStateFile({logger, nodeName: node, stateDir})
    const store = new ClassStore({...followClusterClasses(storeClient, node, logger), client: storeClient, fileClasses: [], logger, nodeName: node, persisted, startGraceMs: 1000})
    stores.push(store)
    return store
  }
  const start = (store: ClassStore): ReturnType<ClassStore['start']> => {
    const controller = new AbortController()
    controllers.push(controller)
    return store.start(controller.signal)
  }
  const create = async (name: string, spec: Record<string, unknown>): Promise<void> => {
    await client.request('POST', deviceClassesPath, {body: deviceClassManifest(name, spec)})
    created.push(name)
  }
  const applicable = (view: ClassView): string[] => view.applicable.map((c) => c.metadata.name).filter((n) => n.startsWith('cs-'))
  const persisted = async (stateDir: string): Promise<{node: string; classes: Array<{metadata: {name: string}}>; nodeLabels: Record<string, string>}> =>
    JSON.parse(await readFile(join(stateDir, 'classes.json'), 'utf8'))

  before(async function () {
    ;({client, plane} = await adminClient(this))
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-class-store-'))
    await client.request('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {labels: {'cs-gpu': 'yes'}, name: node}}})
    await create('cs-everywhere', loopRule('loop1*'))
    await create('cs-gpu', {...loopRule('loop2*'), nodeSelector: {matchLabels: {'cs-gpu': 'yes'}}})
    await create('cs-tpu', {...loopRule('loop3*'), nodeSelector: {matchLabels: {'cs-tpu': 'yes'}}})
  })

  afterEach(async function () {
    for (const c of controllers.splice(0)) c.abort()
    for (const s of stores.splice(0)) await s.stop()
  })

  after(async function () {
    for (const name of created) await client.request('DELETE', `${deviceClassesPath}/${name}`).catch(() => {})
    await client.request('DELETE', `/api/v1/nodes/${node}`).catch(() => {})
    client?.close()
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it("reads the cluster's classes for this node, follows them and the node's labels live, and persists every change", async function () {
    const stateDir = join(dir, 'live')
    const store = storeFor(client, stateDir)
    const views: ClassView[] = []
    store.onChange((view) => views.push(view))
    const {source, view} = await start(store)
    expect(source).to.equal('cluster')
    expect(applicable(view)).to.deep.equal(['cs-everywhere', 'cs-gpu'])
    await waitFor('the state file', async () => (await persisted(stateDir).catch(() => undefined))?.classes.length === 3, {timeoutMs: 5000})
    expect((await persisted(stateDir)).nodeLabels).to.include({'cs-gpu': 'yes'})

    // A label added to the Node selects cs-tpu.
    await client.request('PATCH', `/api/v1/nodes/${node}`, {body: {metadata: {labels: {'cs-tpu': 'yes'}}}, contentType: 'application/merge-patch+json'})
    await waitFor('cs-tpu selected', async () => applicable(store.view).includes('cs-tpu'), {timeoutMs: 5000})
    expect(views.length).to.be.greaterThan(0)
    // A new class, then an edit that breaks it: the last valid spec stays, and the problem is reported.
    await create('cs-new', loopRule('loop4*'))
    await waitFor('cs-new', async () => applicable(store.view).includes('cs-new'), {timeoutMs: 5000})
    await client.request('PATCH', `${deviceClassesPath}/cs-new`, {body: {spec: {match: [{devName: 'loop4[', subsystem: 'block'}]}}, contentType: 'application/merge-patch+json'})
    await waitFor('cs-new reported invalid', async () => store.view.invalid.some((p) => p.name === 'cs-new'), {timeoutMs: 5000})
    const problem = store.view.invalid.find((p) => p.name === 'cs-new')!
    expect(problem).to.include({generation: 2, using: 1})
    expect(store.view.applicable.find((c) => c.metadata.name === 'cs-new')?.spec.match[0].devName).to.equal('loop4*')
    // Deleted: gone from the view and from the file.
    await client.request('DELETE', `${deviceClassesPath}/cs-new`)
    await waitFor('cs-new gone', async () => !applicable(store.view).includes('cs-new') && store.view.invalid.length === 0, {timeoutMs: 5000})
    await waitFor('cs-new gone from the file', async () => !(await persisted(stateDir)).classes.some((c) => c.metadata.name === 'cs-new'), {timeoutMs: 5000})
    await client.request('PATCH', `/api/v1/nodes/${node}`, {body: {metadata: {labels: {'cs-tpu': null}}}, contentType: 'application/merge-patch+json'})
    await waitFor('cs-tpu no longer selected', async () => !applicable(store.view).includes('cs-tpu'), {timeoutMs: 5000})
  })

  it('watches metadata only: a status write reaches it as a small event and costs no request; a spec edit costs one GET', async function () {
    const own = await plane.client()
    try {
      const store = storeFor(own, join(dir, 'watch'))
      await start(store)
      await create('cs-watched', loopRule('loop6*'))
      await waitFor('cs-watched', async () => applicable(store.view).includes('cs-watched'), {timeoutMs: 5000})
      await sleep(300)
      const before = own.stats.requests
      // What every agent does: its node's entry of the status, by server-side apply. The generation stays.
      for (let i = 0; i < 5; i++) {
        await client.request('PATCH', `${deviceClassesPath}/cs-watched/status`, {
          body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'cs-watched'}, status: {nodes: [{devices: [], node: `other-${i}`}]}},
          contentType: 'application/apply-patch+yaml',
          query: {fieldManager: `other-${i}`, force: true},
        })
      }
      await sleep(500)
      expect(own.stats.requests - before, 'requests after 5 status writes').to.equal(0)
      await client.request('PATCH', `${deviceClassesPath}/cs-watched`, {body: {spec: {permissions: 'r'}}, contentType: 'application/merge-patch+json'})
      await waitFor('the edit seen', async () => store.view.applicable.find((c) => c.metadata.name === 'cs-watched')?.spec.permissions === 'r', {timeoutMs: 5000})
      expect(own.stats.requests - before, 'requests after a spec edit').to.equal(1)
    } finally {
      for (const c of controllers.splice(0)) c.abort()
      for (const st of stores.splice(0)) await st.stop()
      own.close()
      await client.request('DELETE', `${deviceClassesPath}/cs-watched`).catch(() => {})
    }
  })

  it("uses the persisted classes when the API server does not answer at start, and takes the cluster's once it does", async function () {
    const stateDir = join(dir, 'outage')
    const first = storeFor(client, stateDir)
    await start(first)
    await waitFor('the state file', async () => (await persisted(stateDir).catch(() => undefined))?.classes.length === 3, {timeoutMs: 5000})
    for (const c of controllers.splice(0)) c.abort()
    await first.stop()

    // The same server behind a port that nothing listens on yet.
    const port = await freePort()
    const kubeconfig = join(dir, 'kubeconfig-outage')
    await writeFile(kubeconfig, (await readFile(plane.kubeconfig, 'utf8')).replace(plane.server, `https://127.0.0.1:${port}`))
    const away = await plane.client(kubeconfig)
    const log = sink()
    const store = storeFor(away, stateDir, log)
    const changed = new Promise<ClassView>((resolve) => store.onChange(resolve))
    const started = performance.now()
    const {source, view} = await start(store)
    expect(source).to.equal('state-dir')
    expect(performance.now() - started, 'start with the API server away (ms)').to.be.below(3000)
    expect(applicable(view)).to.deep.equal(['cs-everywhere', 'cs-gpu'])
    expect(records(log).find((l) => l.msg.startsWith('the API server does not answer; using the classes persisted'))?.classes).to.include.members(['cs-everywhere', 'cs-gpu'])
    expect(store.synced).to.equal(false)

    // Meanwhile a class is added; when the server answers, the store catches up.
    await create('cs-later', loopRule('loop5*'))
    const proxy = await DroppingProxy.start(new URL(plane.server), port)
    try {
      const caughtUp = await Promise.race([changed, sleep(20_000).then(() => undefined)])
      expect(caughtUp, 'a change once the API server answers').to.not.equal(undefined)
      expect(applicable(caughtUp!)).to.deep.equal(['cs-everywhere', 'cs-gpu', 'cs-later'])
      expect(store.synced).to.equal(true)
    } finally {
      for (const c of controllers.splice(0)) c.abort()
      await store.stop()
      away.close()
      await proxy.close()
    }
  })

  it('waits for the API server when nothing is persisted, and ignores a state file it cannot use', async function () {
    const port = await freePort()
    const kubeconfig = join(dir, 'kubeconfig-wait')
    await writeFile(kubeconfig, (await readFile(plane.kubeconfig, 'utf8')).replace(plane.server, `https://127.0.0.1:${port}`))
    const away = await plane.client(kubeconfig)
    const stateDir = join(dir, 'corrupt')
    await rm(stateDir, {force: true, recursive: true})
    await mkdir(stateDir, {recursive: true})
    await writeFile(join(stateDir, 'classes.json'), '{"version": 1, "node": "cs-node", "classes": [')
    const log = sink()
    const store = storeFor(away, stateDir, log)
    let done = false
    const starting = start(store).then((result) => {
      done = true
      return result
    })
    await sleep(2000)
    expect(done, 'start() returned without classes').to.equal(false)
    expect(records(log).map((l) => l.msg)).to.include.members([
      'the persisted DeviceClasses cannot be used; ignored',
      'the API server does not answer and no classes are persisted yet; waiting for it',
    ])
    const proxy = await DroppingProxy.start(new URL(plane.server), port)
    try {
      const {source, view} = await starting
      expect(source).to.equal('cluster')
      expect(applicable(view)).to.include.members(['cs-everywhere', 'cs-gpu'])
      // The unusable file is replaced by a good one.
      await waitFor('a good state file', async () => (await persisted(stateDir).catch(() => undefined))?.node === node, {timeoutMs: 5000})
    } finally {
      for (const c of controllers.splice(0)) c.abort()
      await store.stop()
      away.close()
      await proxy.close()
    }
  })
})
