import {expect} from 'chai'

import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, createTopology, ensureNamespace, exists, inParallel, nodeFeaturePath, resetCluster, topologyPath, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {adminClient} from '../support/cluster.js'
import {nfdctl} from '../support/run-cli.js'

describe('gc once against a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient
  let kubeconfig: string

  before(async function () {
    ;({client, plane} = await adminClient(this))
    kubeconfig = plane.kubeconfig
    for (const ns of ['nfd', 'team-a', 'team-b']) await ensureNamespace(client, ns)
  })

  beforeEach(async function () {
    await resetCluster(client)
  })

  after(() => client?.close())

  /** Nodes live-1..live-N, each with a NodeFeature in nfd and a NodeResourceTopology. */
  async function seedLive(count: number): Promise<void> {
    await seedNodesWithObjects(
      client,
      [...Array(count).keys()].map((i) => `live-${i + 1}`),
      'nfd',
      16,
    )
  }

  it('deletes objects of vanished nodes across namespaces and keeps every live one', async function () {
    await seedLive(4)
    await createNodeFeature(client, 'team-a', 'live-1-vendor', 'live-1')
    await createNodeFeature(client, 'team-a', 'gone-1', 'gone-1')
    await createNodeFeature(client, 'team-b', 'gone-2-vendor', 'gone-2')
    await createTopology(client, 'gone-1')

    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--json'])

    expect(run.exitCode, run.stdout + run.stderr).to.equal(0)
    const report = JSON.parse(run.stdout) as SweepReport
    expect(report.objects.map((o) => `${o.kind}/${o.namespace ?? ''}/${o.name}:${o.result}`).sort()).to.deep.equal([
      'NodeFeature/team-a/gone-1:deleted',
      'NodeFeature/team-b/gone-2-vendor:deleted',
      'NodeResourceTopology//gone-1:deleted',
    ])
    expect(report.kinds.find((k) => k.kind === 'NodeFeature')).to.include({deleted: 2, failed: 0, scanned: 7, stale: 2})
    expect(await exists(client, nodeFeaturePath('team-a', 'gone-1'))).to.equal(false)
    expect(await exists(client, nodeFeaturePath('team-b', 'gone-2-vendor'))).to.equal(false)
    expect(await exists(client, topologyPath('gone-1'))).to.equal(false)
    for (const node of ['live-1', 'live-2', 'live-3', 'live-4']) {
      expect(await exists(client, nodeFeaturePath('nfd', node)), node).to.equal(true)
      expect(await exists(client, topologyPath(node)), node).to.equal(true)
    }
    expect(await exists(client, nodeFeaturePath('team-a', 'live-1-vendor'))).to.equal(true)
  })

  it('deletes an unlabelled NodeFeature with its own reason, and keeps it with --keep-unlabelled', async function () {
    await seedLive(3)
    await createNodeFeature(client, 'team-a', 'third-party', undefined)

    const kept = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--keep-unlabelled', '--json'])
    expect(kept.exitCode).to.equal(0)
    expect(kept.result?.objects).to.deep.equal([])
    expect(await exists(client, nodeFeaturePath('team-a', 'third-party'))).to.equal(true)

    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig])
    expect(run.exitCode).to.equal(0)
    expect(run.stdout).to.match(/third-party\s+<none>\s+no nfd\.node\.kubernetes\.io\/node-name label\s+deleted/)
    expect(await exists(client, nodeFeaturePath('team-a', 'third-party'))).to.equal(false)
  })

  it('pages through lists smaller than the object count and still finds every stale object', async function () {
    await seedLive(5)
    await inParallel(['g1', 'g2', 'g3'], 3, (n) => createNodeFeature(client, 'team-b', n, n))

    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--list-size', '2', '--json'])

    expect(run.exitCode).to.equal(0)
    const report = run.result!
    expect(report.objects.map((o) => o.name).sort()).to.deep.equal(['g1', 'g2', 'g3'])
    // 8 NodeFeatures in pages of 2, 5 topologies in 3 pages, 5 nodes in 3 pages, the 3 gone nodes checked
    // again (a field selector each), then 3 deletes.
    expect(report.apiRequests).to.equal(4 + 3 + 3 + 3 + 3)
  })

  it('--dry-run deletes nothing, and --fail-on-stale exits 3', async function () {
    await seedLive(3)
    await createNodeFeature(client, 'nfd', 'gone', 'gone')

    const dry = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--dry-run'])
    expect(dry.exitCode).to.equal(0)
    expect(dry.stdout).to.contain('Dry run: 1 stale objects would be deleted')
    expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(true)

    const failing = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--dry-run', '--fail-on-stale', '--json'])
    expect(failing.exitCode).to.equal(3)
    expect(failing.result?.objects.map((o) => [o.name, o.action, o.result])).to.deep.equal([['gone', 'none', 'would-delete']])
    expect(await exists(client, nodeFeaturePath('nfd', 'gone'))).to.equal(true)
  })

  it('refuses to delete anything when the cluster lists no Nodes, unless --allow-empty-nodes', async function () {
    await createNodeFeature(client, 'nfd', 'orphan', 'orphan')
    await createTopology(client, 'orphan')

    const refused = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig])
    expect(refused.exitCode).to.equal(1)
    expect(refused.stderr).to.contain('the cluster lists no Nodes')
    expect(refused.stdout).to.match(/orphan.*kept/)
    expect(await exists(client, nodeFeaturePath('nfd', 'orphan'))).to.equal(true)
    expect(await exists(client, topologyPath('orphan'))).to.equal(true)

    // Every object is stale then, so the ratio guard still holds unless --force says otherwise.
    const ratio = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--allow-empty-nodes', '--json'])
    expect(ratio.exitCode).to.equal(1)
    expect(ratio.result?.refused).to.contain('--max-delete-ratio')
    expect(await exists(client, nodeFeaturePath('nfd', 'orphan'))).to.equal(true)

    const allowed = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--allow-empty-nodes', '--force', '--json'])
    expect(allowed.exitCode).to.equal(0)
    expect(allowed.result?.kinds.map((k) => k.deleted)).to.deep.equal([1, 1])
    expect(await exists(client, nodeFeaturePath('nfd', 'orphan'))).to.equal(false)
  })

  it('refuses above --max-delete-ratio and deletes with --force', async function () {
    await seedLive(1)
    await inParallel(['x1', 'x2', 'x3'], 3, (n) => createNodeFeature(client, 'nfd', n, n))

    const refused = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--kinds', 'NodeFeature', '--json'])
    expect(refused.exitCode).to.equal(1)
    expect(refused.result?.refused).to.match(/3 of 4 objects \(75%\) are stale, above --max-delete-ratio 0.5/)
    expect(await exists(client, nodeFeaturePath('nfd', 'x1'))).to.equal(true)

    const raised = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--kinds', 'NodeFeature', '--max-delete-ratio', '0.8', '--json'])
    expect(raised.exitCode).to.equal(0)
    expect(raised.result?.kinds[0]).to.include({deleted: 3, stale: 3})
  })

  it('--force overrides the ratio guard', async function () {
    await seedLive(1)
    await inParallel(['y1', 'y2'], 2, (n) => createTopology(client, n))
    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', kubeconfig, '--kinds', 'noderesourcetopologies', '--force', '--json'])
    expect(run.exitCode).to.equal(0)
    expect(run.result?.kinds).to.have.length(1)
    expect(run.result?.kinds[0]).to.include({deleted: 2, kind: 'NodeResourceTopology'})
    expect(await exists(client, topologyPath('live-1'))).to.equal(true)
  })
})
