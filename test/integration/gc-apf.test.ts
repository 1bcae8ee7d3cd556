import {expect} from 'chai'

import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {listMetadata} from '../../src/lib/kube/metadata-list.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, ensureNamespace, inParallel, resetCluster, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {adminClient} from '../support/cluster.js'
import {GcProcess} from '../support/gc-process.js'
import {bindClusterRole, upsert} from '../support/rbac.js'
import {nfdctl} from '../support/run-cli.js'

const flowcontrol = '/apis/flowcontrol.apiserver.k8s.io/v1'

/** A priority level of `shares` (against ~250 of the built-in levels: 1 share is ~3 seats), borrowing nothing. */
function priorityLevel(name: string, shares: number, queueLengthLimit: number): {metadata: {name: string}; [key: string]: unknown} {
  return {
    apiVersion: 'flowcontrol.apiserver.k8s.io/v1',
    kind: 'PriorityLevelConfiguration',
    metadata: {name},
    spec: {
      limited: {
        borrowingLimitPercent: 0,
        lendablePercent: 0,
        limitResponse: {queuing: {handSize: 1, queueLengthLimit, queues: 1}, type: 'Queue'},
        nominalConcurrencyShares: shares,
      },
      type: 'Limited',
    },
  }
}

/** Puts every request of `user` into `level`, ahead of the built-in flow schemas. */
function flowSchema(name: string, user: string, level: string): {metadata: {name: string}; [key: string]: unknown} {
  return {
    apiVersion: 'flowcontrol.apiserver.k8s.io/v1',
    kind: 'FlowSchema',
    metadata: {name},
    spec: {
      distinguisherMethod: {type: 'ByUser'},
      matchingPrecedence: 300,
      priorityLevelConfiguration: {name: level},
      rules: [
        {
          nonResourceRules: [{nonResourceURLs: ['*'], verbs: ['*']}],
          resourceRules: [{apiGroups: ['*'], clusterScope: true, namespaces: ['*'], resources: ['*'], verbs: ['*']}],
          subjects: [{kind: 'User', user: {name: user}}],
        },
      ],
    },
  }
}

describe('gc once under API Priority and Fairness (real kube-apiserver)', function () {
  this.timeout(180_000)
  let plane: ControlPlane
  let client: KubeClient
  const nodes = [...Array(100).keys()].map((i) => `apf-${i}`)
  const stale = [...Array(600).keys()].map((i) => `apf-stale-${i}`)

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
    await upsert(client, `${flowcontrol}/prioritylevelconfigurations`, priorityLevel('nfdctl-test-tiny', 1, 2))
    await upsert(client, `${flowcontrol}/prioritylevelconfigurations`, priorityLevel('nfdctl-test-bystander', 20, 50))
    await upsert(client, `${flowcontrol}/flowschemas`, flowSchema('nfdctl-test-gc-throttled', 'gc-throttled', 'nfdctl-test-tiny'))
    await upsert(client, `${flowcontrol}/flowschemas`, flowSchema('nfdctl-test-bystander', 'bystander', 'nfdctl-test-bystander'))
    await bindClusterRole(client, 'nfdctl-test-gc-throttled', 'gc-throttled', [
      {apiGroups: [''], resources: ['nodes'], verbs: ['list']},
      {apiGroups: ['nfd.k8s-sigs.io'], resources: ['nodefeatures'], verbs: ['list', 'delete']},
      {apiGroups: ['topology.node.k8s.io'], resources: ['noderesourcetopologies'], verbs: ['list', 'delete']},
    ])
    await bindClusterRole(client, 'nfdctl-test-bystander', 'bystander', [{apiGroups: [''], resources: ['nodes'], verbs: ['list']}])
  })

  after(async () => {
    for (const [kind, name] of [
      ['flowschemas', 'nfdctl-test-gc-throttled'],
      ['flowschemas', 'nfdctl-test-bystander'],
      ['prioritylevelconfigurations', 'nfdctl-test-tiny'],
      ['prioritylevelconfigurations', 'nfdctl-test-bystander'],
    ]) {
      await client?.request('DELETE', `${flowcontrol}/${kind}/${name}`).catch(() => undefined)
    }
    client?.close()
  })

  it('is throttled (429), narrows its window, finishes, deletes exactly the stale set, and does not starve another priority level', async function () {
    await resetCluster(client)
    await seedNodesWithObjects(client, nodes)
    await inParallel(stale, 32, (name) => createNodeFeature(client, 'nfd', name, name))
    const gcKubeconfig = await plane.kubeconfigFor('gc-throttled')
    const bystander = await plane.client(await plane.kubeconfigFor('bystander'))

    // While the collector is throttled in its own tiny level, a client in another level lists Nodes.
    let running = true
    const bystanderLatencies: number[] = []
    const bystanderLoop = (async () => {
      while (running) {
        const started = performance.now()
        await listMetadata(bystander, {group: '', namespaced: false, plural: 'nodes', version: 'v1'}, {pageSize: 500})
        bystanderLatencies.push(performance.now() - started)
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const run = await nfdctl<SweepReport>(['gc', 'once', '--kubeconfig', gcKubeconfig, '--force', '--json']).finally(() => {
      running = false
    })
    await bystanderLoop
    bystander.close()

    expect(run.exitCode, run.stdout + run.stderr).to.equal(0)
    const report = JSON.parse(run.stdout) as SweepReport
    process.stderr.write(
      `      apf: ${report.apiThrottled} throttled, window ${report.concurrency.lowest}-${report.concurrency.highest} (final ${report.concurrency.final}), ${report.durationMs} ms, ${bystanderLatencies.length} bystander lists, slowest ${Math.max(...bystanderLatencies).toFixed(0)} ms\n`,
    )
    expect(report.apiThrottled, 'answers 429').to.be.greaterThan(0)
    expect(report.concurrency.lowest, 'the window narrowed').to.be.lessThan(report.concurrency.highest)
    expect(report.kinds.map((k) => [k.kind, k.stale, k.deleted, k.failed])).to.deep.equal([
      ['NodeFeature', 600, 600, 0],
      ['NodeResourceTopology', 0, 0, 0],
    ])
    const left = await listMetadata(client, {group: 'nfd.k8s-sigs.io', namespaced: true, plural: 'nodefeatures', version: 'v1alpha1'}, {pageSize: 0})
    expect(left.items.map((m) => m.name).sort()).to.deep.equal([...nodes].sort())

    expect(bystander.window.throttled, 'the bystander was never throttled').to.equal(0)
    expect(bystanderLatencies.length, 'bystander lists during the cleanup').to.be.greaterThan(3)
    expect(Math.max(...bystanderLatencies), 'slowest bystander list (ms)').to.be.lessThan(1000)
  })

  it('gc run: the same mass cleanup, with the 429 count and the adapted window in /metrics', async function () {
    await resetCluster(client)
    await seedNodesWithObjects(client, nodes)
    await inParallel(stale, 32, (name) => createNodeFeature(client, 'nfd', name, name))
    const gc = await GcProcess.start(['--kubeconfig', await plane.kubeconfigFor('gc-throttled'), '--interval', '1h', '--grace-period', '0', '--force'])
    try {
      const done = await gc.waitForLog('the first sweep', (l) => l.msg === 'sweep done', 120_000)
      expect(done).to.include({deleted: 600, failed: 0})
      const throttled = await gc.metric('nfd_gc_api_throttled_total')
      const window = await gc.metric('nfd_gc_api_concurrency')
      process.stderr.write(`      apf gc run: ${throttled} throttled, window now ${window}\n`)
      expect(throttled).to.be.greaterThan(0)
      expect(window).to.be.within(1, 66)
      expect(await gc.metric('nfd_gc_objects_deleted_total{kind="NodeFeature"}')).to.equal(600)
    } finally {
      expect(await gc.stop()).to.equal(0)
    }
  })
})
