import {expect} from 'chai'

import {readCluster} from '../../src/lib/gc/cluster-reader.js'
import {deleteStale} from '../../src/lib/gc/deleter.js'
import {gcKinds} from '../../src/lib/gc/kinds.js'
import {sweepOnce} from '../../src/lib/gc/sweep.js'
import {sweepOptionsFrom} from '../../src/lib/gc/sweep-options.js'
import {planSweep} from '../../src/lib/gc/sweep-planner.js'
import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {listMetadata} from '../../src/lib/kube/metadata-list.js'
import type {ControlPlane} from '../controlplane/control-plane.js'
import {deleteCrd, readCrds, applyCrds} from '../controlplane/crds.js'
import {crdDir} from '../controlplane/paths.js'
import {adminClient, startControlPlane} from '../support/cluster.js'
import {bindClusterRole} from '../support/rbac.js'
import {nfdctl} from '../support/run-cli.js'
import {createNode, createNodeFeature, createTopology, ensureNamespace, exists, inParallel, nodeFeaturePath, resetCluster, topologyPath, seedNodesWithObjects} from '../support/seed.js'

const gcRules = [
  {apiGroups: ['nfd.k8s-sigs.io'], resources: ['nodefeatures'], verbs: ['list', 'delete']},
  {apiGroups: ['topology.node.k8s.io'], resources: ['noderesourcetopologies'], verbs: ['list', 'delete']},
]

const defaults = {
  'allow-empty-nodes': false, burst: 100, concurrency: 8, 'dry-run': false, 'fail-on-stale': false, force: false,
  'keep-unlabelled': false, 'list-size': 500, 'max-delete-ratio': 0.5, qps: 100, timeout: '1m',
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
    expect(report.objects.map((o) => [o.name, o.result])).to.deep.equal([['gone', 'failed'], ['gone', 'failed']])
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

    const results = await deleteStale(client, plan.stale, {concurrency: 2})

    expect(results.map((r) => [r.object.kind.kind, r.outcome])).to.deep.equal([['NodeFeature', 'replaced'], ['NodeResourceTopology', 'deleted']])
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
      expect(run.stderr).to.contain('NodeResourceTopology: noderesourcetopologies.topology.node.k8s.io/v1alpha2 is not served (is the CRD noderesourcetopologies.topology.node.k8s.io installed?); skipped')
      expect(run.stdout).to.match(/NodeResourceTopology\s+0\s+0\s+0\s+0\s+CRD not installed: skipped/)
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
    await inParallel([...Array(6).keys()].map((i) => `n${i}`), 6, async (node) => {
      await createNode(client, node)
      await createNodeFeature(client, 'nfd', node, node)
    })
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
    }).then(() => undefined, (error: unknown) => error as Error)
    expect(error?.message).to.match(/continue token expired 2 times; try a larger --list-size/)
    expect(pages).to.equal(2)
  })
})
