import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import {Registry} from 'prom-client'

import {readCluster} from '../../src/lib/gc/cluster-reader.js'
import {Collector} from '../../src/lib/gc/collector.js'
import {deleteStale} from '../../src/lib/gc/deleter.js'
import {gcKinds, nodeNameLabel} from '../../src/lib/gc/kinds.js'
import {createGcMetrics} from '../../src/lib/gc/metrics.js'
import {sweepOptionsFrom} from '../../src/lib/gc/sweep-options.js'
import {planSweep} from '../../src/lib/gc/sweep-planner.js'
import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import {sweepOnce} from '../../src/lib/gc/sweep.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {listMetadata} from '../../src/lib/kube/metadata-list.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {deleteCrd, readCrds, applyCrds} from '../../harness/controlplane/crds.js'
import {crdDir} from '../../harness/controlplane/paths.js'
import {createNode, createNodeFeature, createTopology, ensureNamespace, exists, inParallel, nodeFeaturePath, resetCluster, topologyPath, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient, startControlPlane} from '../support/cluster.js'
import {DroppingProxy} from '../support/dropping-proxy.js'
import {bindClusterRole} from '../support/rbac.js'
import {nfdctl} from '../support/run-cli.js'

const gcRules = [
  {apiGroups: ['nfd.k8s-sigs.io'], resources: ['nodefeatures'], verbs: ['list', 'delete']},
  {apiGroups: ['topology.node.k8s.io'], resources: ['noderesourcetopologies'], verbs: ['list', 'delete']},
]

const defaults = {
  'allow-empty-nodes': false,
  burst: 100,
  concurrency: 8,
  'dry-run': false,
  'fail-on-stale': false,
  force: false,
  'keep-unlabelled': false,
  'list-size': 500,
  'max-delete-ratio': 0.5,
  qps: 100,
  timeout: '1m',
}

describe('gc once safety against a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
  })

  beforeEach(async function () {
    await resetCluster(client)
    await seedNodesWithObjects(client, ['n1', 'n2', 'n3'], 'nfd', 3)
    await createNodeFeature(client, 'nfd', 'gone', 'gone')
    await createTopology(client, 'gone')
  })

  after(() => client?.close())

  it('refuses with nothing deleted when RBAC forbids listing Nodes', async function () {
    await bindClusterRole(client, 'nfdctl-test-no-nodes', 'gc-no-nodes', gcRules)
    const kubeconfig = await plane.kubeconfigFor('gc-no-nodes')

    for (const json of [false, true]) {
      const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, ...(json ? ['--json'] : [])])
      expect(run.exitCode, `--json=${json}`).to.equal(1)
      expect(json ? run.stdout : run.error?.message).to.match(/cannot list Nodes .*403.*nothing deleted/)
    }
    expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(true)
    expect(await exists(client, topologyPath('gone'))).to.equal(true)
  })

  it('exits 1 and reports each object when deletions are forbidden', async function () {
    const readOnly = gcRules.map((r) => ({...r, verbs: ['list']}))
    await bindClusterRole(client, 'nfdctl-test-read-only', 'gc-read-only', [...readOnly, {apiGroups: [''], resources: ['nodes'], verbs: ['list']}])
    const kubeconfig = await plane.kubeconfigFor('gc-read-only')

    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--json'])

    expect(run.exitCode).to.equal(1)
    const report = JSON.parse(run.stdout) as SweepReport
    expect(report.objects.map((o) => [o.name, o.result])).to.deep.equal([
      ['gone', 'failed'],
      ['gone', 'failed'],
    ])
    expect(report.objects[0].error).to.match(/403/)
    expect(report.kinds.map((k) => k.failed)).to.deep.equal([1, 1])
    expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(true)
  })

  it('least privilege is enough: list nodes, list+delete the two kinds', async function () {
    await bindClusterRole(client, 'nfdctl-test-gc', 'gc-minimal', [...gcRules, {apiGroups: [''], resources: ['nodes'], verbs: ['list']}])
    const kubeconfig = await plane.kubeconfigFor('gc-minimal')
    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--json'])
    expect(run.exitCode, run.stdout).to.equal(0)
    expect(run.result?.kinds.map((k) => k.deleted)).to.deep.equal([1, 1])
  })

  it('does not delete an object re-created with a new UID between plan and delete', async function () {
    const read = await readCluster(client, {kinds: gcKinds, listSize: 500})
    const plan = planSweep(read.view, sweepOptionsFrom(defaults))
    expect(plan.action).to.equal('delete')
    expect(plan.stale.map((s) => s.meta.name)).to.deep.equal(['gone', 'gone'])

    // Meanwhile the NodeFeature is deleted and created again under the same name (a new object, new UID).
    await client.request('DELETE', nodeFeaturePath('nfd', 'gone'))
    const recreated = await createNodeFeature(client, 'nfd', 'gone', 'gone')
    expect(recreated.uid).to.not.equal(plan.stale[0].meta.uid)

    const results = await deleteStale(client, plan.stale, {concurrency: 2, keepUnlabelled: false, listSize: 500})

    expect(results.map((r) => [r.object.kind.kind, r.outcome])).to.deep.equal([
      ['NodeFeature', 'replaced'],
      ['NodeResourceTopology', 'deleted'],
    ])
    const live = await client.request<{metadata: {uid: string}}>('GET', nodeFeaturePath('nfd', 'gone'))
    expect(live.metadata.uid).to.equal(recreated.uid)
  })

  it('skips a kind whose CRD is not installed with one clear line', async function () {
    this.timeout(120_000)
    const crds = await readCrds(crdDir)
    const nrt = crds.find((c) => c.metadata.name === 'noderesourcetopologies.topology.node.k8s.io')!
    await deleteCrd(client, nrt)
    try {
      const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', plane.kubeconfig])
      expect(run.exitCode, run.stdout + run.stderr).to.equal(0)
      expect(run.stderr).to.contain(
        'NodeResourceTopology: noderesourcetopologies.topology.node.k8s.io/v1alpha2 is not served (is the CRD noderesourcetopologies.topology.node.k8s.io installed?); skipped',
      )
      expect(run.stdout).to.match(/NodeResourceTopology\s+0\s+0\s+0\s+0\s+0\s+CRD not installed: skipped/)
      expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(false)
    } finally {
      await applyCrds(client, [nrt])
    }
  })

  it('fails in one line, deleting nothing, when the API server is unreachable', async function () {
    this.timeout(60_000)
    const {writeFile, readFile} = await import('node:fs/promises')
    const kubeconfig = `${plane.kubeconfig}-unreachable`
    await writeFile(kubeconfig, (await readFile(plane.kubeconfig, 'utf8')).replace(plane.server, 'https://127.0.0.1:1'))
    const run = await nfdctl(['gc', 'once', '--kubeconfig', kubeconfig, '--timeout', '20s'])
    expect(run.exitCode).to.equal(1)
    expect(run.error?.message).to.match(/^cannot list NodeFeature objects; nothing deleted: GET \/apis\/nfd.k8s-sigs.io\/v1alpha1\/nodefeatures on https:\/\/127.0.0.1:1 failed: ECONNREFUSED/)
    expect(run.error?.message).to.not.contain('\n')
  })

  it('never judges stale an object whose Node was created, before it, while the cluster was read', async function () {
    this.timeout(60_000)
    // Node first, then its objects, as a joining node's kubelet and nfd-worker do, all through the read.
    // The node list overlaps the kinds' later pages; it must still be a later snapshot than each kind's.
    let churning = true
    const created: string[] = []
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        const name = `joining-${i}`
        await createNode(client, name)
        await Promise.all([createNodeFeature(client, 'nfd', name, name), createTopology(client, name)])
        created.push(name)
      }
    })()
    const order: string[] = []
    try {
      for (let read = 0; read < 5; read++) {
        const {view} = await readCluster(client, {
          kinds: gcKinds,
          listSize: 2,
          onEvent: (e) => {
            if (e.type === 'listing' && !order.includes(e.what)) order.push(e.what)
          },
        })
        const plan = planSweep(view, sweepOptionsFrom({...defaults, 'max-delete-ratio': 1}))
        expect(plan.stale.map((s) => s.meta.name).filter((name) => name !== 'gone')).to.deep.equal([])
        // The node list begins only after each kind's first page.
        expect(order.indexOf('Node')).to.equal(2)
        order.length = 0
      }
    } finally {
      churning = false
      await churn
    }
    expect(created.length).to.be.greaterThan(5)
  })

  describe('exact deletes: only the version judged stale is deleted', function () {
    const relabel = (name: string, node: string): Promise<unknown> =>
      client.request('PATCH', nodeFeaturePath('nfd', name), {body: {metadata: {labels: {[nodeNameLabel]: node}}}, contentType: 'application/merge-patch+json'})
    const nodeLabelOf = async (name: string): Promise<string | undefined> =>
      (await client.request<{metadata: {labels?: Record<string, string>}}>('GET', nodeFeaturePath('nfd', name))).metadata.labels?.[nodeNameLabel]
    const outcomes = (report: SweepReport): string[][] => report.objects.map((o) => [o.kind, o.name, o.result])
    const counts = (report: SweepReport): number[][] => report.kinds.map((k) => [k.deleted, k.changed, k.failed])

    it('keeps a NodeFeature re-labelled to a live node between list and delete, reported as changed (least privilege)', async function () {
      // The look again needs no more than gc once's documented least privilege: list nodes, list+delete the kinds.
      await bindClusterRole(client, 'nfdctl-test-gc', 'gc-minimal', [...gcRules, {apiGroups: [''], resources: ['nodes'], verbs: ['list']}])
      const minimal = await plane.client(await plane.kubeconfigFor('gc-minimal'))
      const report = await sweepOnce(minimal, sweepOptionsFrom(defaults), {beforeDelete: () => relabel('gone', 'n1').then(() => undefined)}).finally(() => minimal.close())

      expect(outcomes(report)).to.deep.equal([
        ['NodeFeature', 'gone', 'changed'],
        ['NodeResourceTopology', 'gone', 'deleted'],
      ])
      expect(counts(report)).to.deep.equal([
        [0, 1, 0],
        [1, 0, 0],
      ])
      expect(await nodeLabelOf('gone')).to.equal('n1')
    })

    describe('a node that registers again under its name after the node list', function () {
      const versionOf = async (path: string): Promise<string> => (await client.request<{metadata: {resourceVersion: string}}>('GET', path)).metadata.resourceVersion

      it('keeps its unchanged objects, reported as node-exists and counted as changed (one field selector per node, least privilege)', async function () {
        await bindClusterRole(client, 'nfdctl-test-gc', 'gc-minimal', [...gcRules, {apiGroups: [''], resources: ['nodes'], verbs: ['list']}])
        const minimal = await plane.client(await plane.kubeconfigFor('gc-minimal'))
        const planned = new Map<string, string>()
        const report = await sweepOnce(minimal, sweepOptionsFrom(defaults), {
          afterPlan: async (stale) => {
            for (const s of stale) planned.set(s.kind.kind, s.meta.resourceVersion!)
            // The node list is done and judged these objects stale; now kubelet registers the node again.
            await createNode(client, 'gone')
          },
        }).finally(() => minimal.close())

        expect(outcomes(report)).to.deep.equal([
          ['NodeFeature', 'gone', 'node-exists'],
          ['NodeResourceTopology', 'gone', 'node-exists'],
        ])
        expect(counts(report)).to.deep.equal([
          [0, 1, 0],
          [0, 1, 0],
        ])
        // Unchanged: the delete preconditions would have held, so only the second look at the node saved them.
        expect(await versionOf(nodeFeaturePath('nfd', 'gone'))).to.equal(planned.get('NodeFeature'))
        expect(await versionOf(topologyPath('gone'))).to.equal(planned.get('NodeResourceTopology'))
      })

      it('keeps its objects among many stale ones and deletes the rest (one node list)', async function () {
        const goneNodes = [...Array(25).keys()].map((i) => `gone-${i}`)
        await inParallel(goneNodes, 8, (node) => createNodeFeature(client, 'nfd', node, node))
        const report = await sweepOnce(client, sweepOptionsFrom({...defaults, kinds: 'NodeFeature', 'max-delete-ratio': 1}), {
          afterPlan: async (stale) => {
            expect(stale).to.have.length(26)
            await createNode(client, 'gone-7')
          },
        })

        const kept = report.objects.filter((o) => o.result !== 'deleted').map((o) => [o.name, o.result])
        expect(kept).to.deep.equal([['gone-7', 'node-exists']])
        expect(counts(report)).to.deep.equal([[25, 1, 0]])
        expect(await exists(client, nodeFeaturePath('nfd', 'gone-7'))).to.equal(true)
        expect(await exists(client, nodeFeaturePath('nfd', 'gone-8'))).to.equal(false)
      })

      it('across a node list of many pages, keeps the objects of nodes back before and after the live ones in name order, and deletes the rest', async function () {
        // With list-size 2 the check reads pages [a-3 n1] [n2 n3] [p-7]: the a-* names are answered by its
        // first page (their deletes may start), the p-* ones by its last.
        const goneNodes = [...Array(13).keys()].flatMap((i) => [`a-${i}`, `p-${i}`])
        await inParallel(goneNodes, 8, (node) => createNodeFeature(client, 'nfd', node, node))
        const report = await sweepOnce(client, sweepOptionsFrom({...defaults, kinds: 'NodeFeature', 'list-size': 2, 'max-delete-ratio': 1}), {
          afterPlan: async (stale) => {
            expect(stale).to.have.length(27)
            await createNode(client, 'a-3')
            await createNode(client, 'p-7')
          },
        })

        const kept = report.objects.filter((o) => o.result !== 'deleted').map((o) => [o.name, o.result])
        expect(kept).to.deep.equal([
          ['a-3', 'node-exists'],
          ['p-7', 'node-exists'],
        ])
        expect(counts(report)).to.deep.equal([[25, 2, 0]])
        for (const node of ['a-3', 'p-7']) expect(await exists(client, nodeFeaturePath('nfd', node)), node).to.equal(true)
        for (const node of ['a-2', 'a-4', 'gone', 'p-6', 'p-12']) expect(await exists(client, nodeFeaturePath('nfd', node)), node).to.equal(false)
      })
    })

    it('deletes, at its new version, an object that changed but is still stale (re-labelled to another gone node)', async function () {
      const report = await sweepOnce(client, sweepOptionsFrom(defaults), {beforeDelete: () => relabel('gone', 'also-gone').then(() => undefined)})

      expect(outcomes(report)).to.deep.equal([
        ['NodeFeature', 'gone', 'deleted'],
        ['NodeResourceTopology', 'gone', 'deleted'],
      ])
      expect(counts(report)).to.deep.equal([
        [1, 0, 0],
        [1, 0, 0],
      ])
      expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(false)
    })

    it('keeps an unlabelled NodeFeature that gains the label of a live node', async function () {
      await createNodeFeature(client, 'nfd', 'unlabelled', undefined)
      const report = await sweepOnce(client, sweepOptionsFrom({...defaults, kinds: 'NodeFeature'}), {beforeDelete: () => relabel('unlabelled', 'n2').then(() => undefined)})

      expect(outcomes(report)).to.deep.equal([
        ['NodeFeature', 'gone', 'deleted'],
        ['NodeFeature', 'unlabelled', 'changed'],
      ])
      expect(await nodeLabelOf('unlabelled')).to.equal('n2')
    })

    it('keeps an object re-created under the same name, reported as replaced and counted as changed', async function () {
      let recreated = ''
      const report = await sweepOnce(client, sweepOptionsFrom(defaults), {
        beforeDelete: async () => {
          await client.request('DELETE', nodeFeaturePath('nfd', 'gone'))
          recreated = (await createNodeFeature(client, 'nfd', 'gone', 'gone')).uid
        },
      })

      expect(outcomes(report)).to.deep.equal([
        ['NodeFeature', 'gone', 'replaced'],
        ['NodeResourceTopology', 'gone', 'deleted'],
      ])
      expect(counts(report)).to.deep.equal([
        [0, 1, 0],
        [1, 0, 0],
      ])
      const live = await client.request<{metadata: {uid: string}}>('GET', nodeFeaturePath('nfd', 'gone'))
      expect(live.metadata.uid).to.equal(recreated)
    })

    it('counts a delete whose answer was lost, and whose retry then found nothing, as deleted (not absent)', async function () {
      const proxy = await DroppingProxy.start(new URL(plane.server))
      const kubeconfig = `${plane.kubeconfig}-dropping-proxy`
      await writeFile(kubeconfig, (await readFile(plane.kubeconfig, 'utf8')).replace(plane.server, proxy.url))
      const viaProxy = await plane.client(kubeconfig)
      try {
        const report = await sweepOnce(viaProxy, sweepOptionsFrom({...defaults, concurrency: 1, kinds: 'NodeFeature'}), {beforeDelete: async () => proxy.arm()})

        expect(proxy.dropped, 'answers dropped').to.equal(1)
        expect(viaProxy.stats.retries, 'retries').to.equal(1)
        expect(outcomes(report)).to.deep.equal([['NodeFeature', 'gone', 'deleted']])
        expect(counts(report)).to.deep.equal([[1, 0, 0]])
        expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(false)
      } finally {
        viaProxy.close()
        await proxy.close()
      }
    })

    it('gc run: keeps a re-labelled object, and its metrics count it as kept, not deleted', async function () {
      const registry = new Registry()
      const metrics = createGcMetrics(registry, 'test')
      const collector = new Collector({
        beforeDelete: () => relabel('gone', 'n3').then(() => undefined),
        client,
        concurrency: 4,
        graceMs: 0,
        intervalMs: 3_600_000,
        kinds: gcKinds,
        listSize: 500,
        metrics,
        plan: sweepOptionsFrom(defaults),
      })
      const controller = new AbortController()
      try {
        await collector.start(controller.signal)
      } finally {
        await collector.stop()
      }
      const value = async (name: string, labels: Record<string, string>): Promise<number> => {
        const metric = await registry.getSingleMetric(name)!.get()
        return metric.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0
      }
      expect(await value('nfd_gc_objects_kept_total', {kind: 'NodeFeature', reason: 'changed'})).to.equal(1)
      expect(await value('nfd_gc_objects_deleted_total', {kind: 'NodeFeature'})).to.equal(0)
      expect(await value('nfd_gc_objects_deleted_total', {kind: 'NodeResourceTopology'})).to.equal(1)
      expect(await value('nfd_gc_object_delete_failures_total', {kind: 'NodeFeature'})).to.equal(0)
      expect(await nodeLabelOf('gone')).to.equal('n3')
      expect(await exists(client, topologyPath('gone'))).to.equal(false)
    })
  })
})

describe('list restart on 410 Expired (real etcd compaction)', function () {
  // kube-apiserver >= 1.34 serves continue tokens from watch-cache snapshots (ListFromCacheSnapshot), which
  // outlive an etcd compaction for ~75 s. With the gate off, pages come from etcd and a compaction between
  // pages makes the next page answer 410 Expired — the behaviour of older servers and of tokens older than
  // the snapshot window. A private control plane keeps the shared one on production defaults.
  let plane: ControlPlane
  let client: KubeClient

  before(async function () {
    this.timeout(40 * 60_000)
    plane = await startControlPlane(this, ['--feature-gates=ListFromCacheSnapshot=false'])
    client = await plane.client()
    await ensureNamespace(client, 'nfd')
    await inParallel(
      [...Array(6).keys()].map((i) => `n${i}`),
      6,
      async (node) => {
        await createNode(client, node)
        await createNodeFeature(client, 'nfd', node, node)
      },
    )
    await inParallel(['gone-a', 'gone-b'], 2, (node) => createNodeFeature(client, 'nfd', node, node))
  })

  after(async () => {
    client?.close()
    await plane?.stop()
  })

  it('restarts a paginated list whose continue token expired and sees a consistent result', async function () {
    const events: string[] = []
    let compacted = false
    const report = await sweepOnce(client, sweepOptionsFrom({...defaults, 'dry-run': true, kinds: 'NodeFeature', 'list-size': 3}), {
      afterPage: async (what, page) => {
        if (what !== 'NodeFeature' || page !== 1 || compacted) return
        compacted = true
        // A write after page 1, then compaction past the token's revision: page 2 must now be 410.
        await createNodeFeature(client, 'nfd', 'gone-c', 'gone-c')
        await plane.compactEtcd(await plane.etcdRevision())
      },
      onEvent: (e) => {
        if (e.type === 'listing' && e.restarted) events.push(`restart:${e.what}`)
      },
    })
    expect(compacted).to.equal(true)
    expect(events).to.deep.equal(['restart:NodeFeature'])
    // The restarted list includes the object written mid-list: one consistent snapshot, no duplicates.
    expect(report.kinds[0]).to.include({scanned: 9, stale: 3})
    expect(report.objects.map((o) => o.name).sort()).to.deep.equal(['gone-a', 'gone-b', 'gone-c'])
  })

  it('lists the Nodes again when a kind restarts after the node list began: its new snapshot is later', async function () {
    const seen: string[] = []
    let compacted = false
    const report = await sweepOnce(client, sweepOptionsFrom({...defaults, 'dry-run': true, kinds: 'NodeFeature', 'list-size': 3, 'max-delete-ratio': 1}), {
      afterPage: async (what, page) => {
        if (what !== 'NodeFeature' || page !== 1 || compacted) return
        compacted = true
        // The node list is done (its snapshot, ended before the compaction, cannot restart); then a node
        // joins with its NodeFeature, and a compaction makes the NodeFeature list restart: the new list has
        // the object, the first node list not its node.
        await waitFor('the node list to end', async () => seen.includes('listed:Node'), {intervalMs: 5, timeoutMs: 5000})
        await createNode(client, 'joined')
        await createNodeFeature(client, 'nfd', 'joined', 'joined')
        await plane.compactEtcd(await plane.etcdRevision())
      },
      onEvent: (e) => {
        if (e.type === 'listing') seen.push(`${e.restarted ? 'restart' : 'listing'}:${e.what}`)
        if (e.type === 'listed') seen.push(`listed:${e.what}`)
      },
    })
    expect(compacted).to.equal(true)
    expect(seen).to.include('restart:NodeFeature')
    const stale = report.objects.map((o) => o.name)
    expect(stale).to.include.members(['gone-a', 'gone-b'])
    expect(stale).to.not.include('joined')
    expect(seen.filter((e) => e === 'listed:Node')).to.have.length(2)
  })

  it('gives up after too many restarts with a message that names the fix', async function () {
    let pages = 0
    const error = await listMetadata(client, gcKinds[0].resource, {
      maxRestarts: 1,
      onPage: async () => {
        pages++
        await createNodeFeature(client, 'nfd', `churn-${pages}`, 'churn')
        await plane.compactEtcd(await plane.etcdRevision())
      },
      pageSize: 2,
    }).then(
      () => undefined,
      (error: unknown) => error as Error,
    )
    expect(error?.message).to.match(/continue token expired 2 times; try a larger --list-size/)
    expect(pages).to.equal(2)
  })
})
