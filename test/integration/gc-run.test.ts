import {expect} from 'chai'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {
  createNode,
  createNodeFeature,
  createTopology,
  ensureNamespace,
  exists,
  inParallel,
  nodeFeaturePath,
  resetCluster,
  seedNodesWithObjects,
  topologyPath,
  waitUntilGone,
} from '../../harness/controlplane/seed.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient} from '../support/cluster.js'
import {GcProcess, type LogLine} from '../support/gc-process.js'
import {tcpReachable} from '../support/tcp-reachable.js'

describe('gc run against a real kube-apiserver', function () {
  this.timeout(60_000)
  let plane: ControlPlane
  let client: KubeClient
  const running: GcProcess[] = []

  const start = async (...args: string[]): Promise<GcProcess> => {
    const gc = await GcProcess.start(['--kubeconfig', plane.kubeconfig, ...args])
    running.push(gc)
    return gc
  }
  const gone = (paths: string[], withinMs: number, what: string): Promise<void> => waitUntilGone(client, paths, withinMs, what)
  const seedNodes = (names: string[]): Promise<void> => seedNodesWithObjects(client, names)

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
  })

  beforeEach(async () => {
    await resetCluster(client)
  })

  afterEach(async function () {
    const stopped = running.splice(0)
    const codes = await Promise.all(stopped.map((gc) => gc.stop()))
    if (this.currentTest?.state === 'passed')
      expect(
        codes.every((c) => c === 0),
        `exit codes ${codes.join(',')}`,
      ).to.equal(true)
  })

  after(() => client?.close())

  it('collects stale objects within 3 s of start, and stale objects created later within 3 s (--interval 1s)', async function () {
    await seedNodes(['n1', 'n2', 'n3'])
    await createNodeFeature(client, 'nfd', 'old-gone', 'old-gone')
    await createTopology(client, 'old-gone')

    const gc = await start('--interval', '1s', '--grace-period', '0')
    // From the command's start (its first line), not from the spawn: the dev entry's TypeScript loader alone
    // takes 1-3 s on a loaded 2-core machine, which the installed CLI does not pay.
    const starting = await gc.waitForLog('the start line', (l) => l.msg === 'gc run starting')
    await gone([nodeFeaturePath('nfd', 'old-gone'), topologyPath('old-gone')], 3000 - (Date.now() - starting.time), 'stale objects gone within 3 s of start')

    await createNodeFeature(client, 'nfd', 'new-gone', 'new-gone')
    await createTopology(client, 'new-gone')
    await gone([nodeFeaturePath('nfd', 'new-gone'), topologyPath('new-gone')], 3000, 'later stale objects gone within 3 s')
    for (const node of ['n1', 'n2', 'n3']) {
      expect(await exists(client, nodeFeaturePath('nfd', node))).to.equal(true)
      expect(await exists(client, topologyPath(node))).to.equal(true)
    }
  })

  it("returns the C heap's free pages to the kernel after a sweep", async function () {
    await seedNodes(['n1'])
    const gc = await start('--interval', '1h', '--log-level', 'debug')
    await gc.waitForLog('the first sweep', (l) => l.msg === 'sweep done')
    const returned = await gc.waitForLog('the free pages returned', (l) => l.msg === 'free native memory returned to the kernel')
    expect(returned.rssMb, 'the RSS after it').to.be.a('number').greaterThan(0)
  })

  it('collects the objects of a deleted Node at once, without waiting for the interval', async function () {
    await seedNodes(['keep', 'drop'])
    const gc = await start('--interval', '1h', '--grace-period', '0')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')

    const deletedAt = Date.now()
    await client.request('DELETE', '/api/v1/nodes/drop')
    await gone([nodeFeaturePath('nfd', 'drop'), topologyPath('drop')], 2000, "the deleted node's objects")
    const latency = Date.now() - deletedAt
    expect(latency).to.be.lessThan(2000)
    expect(await exists(client, nodeFeaturePath('nfd', 'keep'))).to.equal(true)
    const collected = await gc.waitForLog('per-node collection', (l) => l.msg === 'collected objects of deleted nodes')
    expect(collected.nodes).to.deep.equal(['drop'])
    expect(gc.count((l) => l.msg === 'sweep done')).to.equal(1)
  })

  it("finds a deleted Node's objects by name first and by label after: named otherwise, in another namespace, or named after it but labelled for a live node", async function () {
    await ensureNamespace(client, 'nfd-extra')
    await ensureNamespace(client, 'nfd-other')
    await seedNodes(['keep', 'drop'])
    await createNodeFeature(client, 'nfd-extra', 'drop', 'drop') // named after the node, in a second namespace
    await createNodeFeature(client, 'nfd', 'drop-extra', 'drop') // named otherwise: only the label says so
    await createNodeFeature(client, 'nfd-extra', 'keep', 'drop')
    await createNodeFeature(client, 'nfd-other', 'drop', 'keep') // the deleted node's name, a live node's label
    const gc = await start('--interval', '1h', '--grace-period', '0')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')

    await client.request('DELETE', '/api/v1/nodes/drop')
    await gone(
      [nodeFeaturePath('nfd', 'drop'), nodeFeaturePath('nfd-extra', 'drop'), nodeFeaturePath('nfd', 'drop-extra'), nodeFeaturePath('nfd-extra', 'keep'), topologyPath('drop')],
      3000,
      'every object labelled for the deleted node',
    )
    const collected = await gc.waitForLog('per-node collection', (l) => l.msg === 'collected objects of deleted nodes')
    expect(collected).to.include({deleted: 5, failed: 0, found: 5})
    expect(await exists(client, nodeFeaturePath('nfd-other', 'drop'))).to.equal(true)
    expect(await exists(client, nodeFeaturePath('nfd', 'keep'))).to.equal(true)
    expect(gc.count((l) => l.msg === 'sweep done')).to.equal(1)
  })

  it('coalesces the deletion of 200 Nodes into one sweep', async function () {
    const all = [...Array(230).keys()].map((i) => `mass-${i}`)
    await seedNodes(all)
    const gc = await start('--interval', '1h', '--grace-period', '0', '--max-delete-ratio', '0.9')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')

    const doomed = all.slice(0, 200)
    await inParallel(doomed, 32, (n) => client.request('DELETE', `/api/v1/nodes/${n}`))
    await gone(
      doomed.flatMap((n) => [nodeFeaturePath('nfd', n), topologyPath(n)]),
      20_000,
      'objects of 200 deleted nodes',
    )
    const deletedLines = (): number => gc.count((l) => l.msg === 'deleted stale object')
    await waitFor('400 deletion log lines', async () => deletedLines() === 400, {timeoutMs: 5000})

    const sweeps = gc.logs.filter((l) => l.msg === 'sweep done' && l.trigger === 'mass node deletion')
    const collected = gc.logs.filter((l) => l.msg === 'collected objects of deleted nodes')
    const perNode = collected.flatMap((l) => l.nodes as string[])
    expect(sweeps.length, gc.transcript()).to.be.within(1, 2)
    // A small batch handled after a sweep names its nodes but finds their objects gone: count deletions, not nodes.
    expect([...sweeps, ...collected].reduce((n, l) => n + (l.deleted as number), 0)).to.equal(400)
    expect(perNode.length, 'nodes handled one by one').to.be.lessThan(40)
    expect(await exists(client, nodeFeaturePath('nfd', 'mass-229'))).to.equal(true)
  })

  it('waits out --grace-period: an object is deleted only on its second sighting', async function () {
    await seedNodes(['stays', 'leaves'])
    const gc = await start('--interval', '1h', '--grace-period', '3s')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')
    await client.request('DELETE', '/api/v1/nodes/leaves')
    const deletedAt = Date.now()
    await gc.waitForLog('first sighting', (l) => l.msg === 'collected objects of deleted nodes' && l.found === 2)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    expect(await exists(client, nodeFeaturePath('nfd', 'leaves')), 'still there 1.5 s after the node went').to.equal(true)

    await gone([nodeFeaturePath('nfd', 'leaves'), topologyPath('leaves')], 6000, 'objects after the grace period')
    expect(Date.now() - deletedAt).to.be.at.least(3000)
    const sweep = await gc.waitForLog('second sighting', (l) => l.msg === 'sweep done' && l.trigger === 'grace period elapsed')
    expect(sweep.deleted).to.equal(2)
  })

  it('keeps an object whose Node comes back within the grace period', async function () {
    await seedNodes(['flappy', 'steady-1', 'steady-2', 'steady-3'])
    const gc = await start('--interval', '1h', '--grace-period', '2s')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')
    await client.request('DELETE', '/api/v1/nodes/flappy')
    await gc.waitForLog('first sighting', (l) => l.msg === 'collected objects of deleted nodes' && l.found === 2)
    await createNode(client, 'flappy')
    await gc.waitForLog('second look', (l) => l.msg === 'sweep done' && l.trigger === 'grace period elapsed', 6000)
    expect(await exists(client, nodeFeaturePath('nfd', 'flappy'))).to.equal(true)
    expect(await exists(client, topologyPath('flappy'))).to.equal(true)
  })

  it('serves /healthz, /readyz and /metrics with what happened', async function () {
    await seedNodes(['m1', 'm2'])
    await inParallel(['x1', 'x2'], 2, (n) => createNodeFeature(client, 'nfd', n, n))
    await createTopology(client, 'x1')
    const gc = await start('--interval', '1h', '--grace-period', '0')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')

    expect(await gc.get('/healthz')).to.deep.equal({body: 'ok\n', status: 200})
    expect(await gc.get('/readyz')).to.deep.equal({body: 'ok\n', status: 200})
    expect(await gc.metric('nfd_gc_objects_deleted_total{kind="NodeFeature"}')).to.equal(2)
    expect(await gc.metric('nfd_gc_objects_deleted_total{kind="NodeResourceTopology"}')).to.equal(1)
    expect(await gc.metric('nfd_gc_stale_objects{kind="NodeFeature"}')).to.equal(2)
    expect(await gc.metric('nfd_gc_leader')).to.equal(1)
    expect(await gc.metric('nfd_gc_api_throttled_total')).to.equal(0)
    expect(await gc.metric('nfd_gc_api_concurrency')).to.be.within(1, 66)
    expect(await gc.metric('nfd_gc_sweep_duration_seconds_count')).to.equal(1)
    expect(await gc.metric('nfd_gc_build_info{version="0.1.0"}')).to.equal(1)
    const lastSweep = await gc.metric('nfd_gc_last_successful_sweep_timestamp_seconds')
    expect(lastSweep).to.be.closeTo(Date.now() / 1000, 30)
    expect((await gc.get('/nope')).status).to.equal(404)
  })

  it('serves them only on the address of --metrics-bind-address: on 127.0.0.1, 127.0.0.2 is refused', async function () {
    await seedNodes(['n1'])
    const port = await freePort()
    const gc = new CliProcess(['gc', 'run', '--kubeconfig', plane.kubeconfig, '--log-format', 'json', '--metrics-bind-address', `127.0.0.1:${port}`])
    try {
      const starting = await gc.waitFor('the start line', () => gc.json<LogLine>().find((l) => l.msg === 'gc run starting'), {intervalMs: 20, timeoutMs: 15_000})
      expect(starting).to.include({metricsHost: '127.0.0.1', metricsPort: port})
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200)
      expect(await tcpReachable('127.0.0.2', port)).to.equal(false)
    } finally {
      expect(await gc.stop('SIGTERM'), gc.transcript()).to.equal(0)
    }
  })

  it('reports not ready, and deletes nothing, when a sweep is refused for safety', async function () {
    await inParallel(['orphan-1', 'orphan-2'], 2, (n) => createNodeFeature(client, 'nfd', n, n))
    const gc = await start('--interval', '1h', '--grace-period', '0')
    await gc.waitForLog('refusal', (l) => l.level === 'warn' && String(l.msg).includes('the cluster lists no Nodes'))
    const readyz = await gc.get('/readyz')
    expect(readyz.status).to.equal(503)
    expect(readyz.body).to.contain('refused')
    expect(await gc.metric('nfd_gc_sweeps_refused_total')).to.equal(1)
    expect(await exists(client, nodeFeaturePath('nfd', 'orphan-1'))).to.equal(true)
  })

  it("deleting every Node of a small cluster goes through the sweep's guards: nothing is deleted", async function () {
    await seedNodes(['edge-1', 'edge-2', 'edge-3'])
    const gc = await start('--interval', '1h', '--grace-period', '0')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')
    await inParallel(['edge-1', 'edge-2', 'edge-3'], 3, (n) => client.request('DELETE', `/api/v1/nodes/${n}`))
    await gc.waitForLog('the refusal', (l) => l.level === 'warn' && String(l.msg).includes('the cluster lists no Nodes'))
    for (const node of ['edge-1', 'edge-2', 'edge-3']) expect(await exists(client, nodeFeaturePath('nfd', node)), node).to.equal(true)
    expect(gc.count((l) => l.msg === 'collected objects of deleted nodes')).to.equal(0)
  })

  it('asks the API server, not only its cache, whether a node is gone', async function () {
    const {existingNodes} = await import('../../src/lib/gc/live-nodes.js')
    const names = [...Array(25).keys()].map((i) => `live-check-${i}`)
    await inParallel(names.slice(0, 12), 12, (n) => createNode(client, n))
    expect([...(await existingNodes(client, ['live-check-0', 'live-check-20', 'live-check-3'], 500))].sort()).to.deep.equal(['live-check-0', 'live-check-3'])
    // More than 20 names: one fresh node list instead of a request per name.
    const before = client.stats.requests
    expect((await existingNodes(client, names, 500)).size).to.equal(12)
    expect(client.stats.requests - before).to.equal(1)
  })

  it('stops on SIGTERM within a few seconds with exit code 0', async function () {
    await seedNodes(['t1'])
    const gc = await start('--interval', '1h')
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')
    const sentAt = Date.now()
    expect(await gc.stop('SIGTERM')).to.equal(0)
    expect(Date.now() - sentAt).to.be.lessThan(3000)
    expect(gc.logs.map((l) => l.msg)).to.include.members(['shutting down', 'stopped'])
  })
})
