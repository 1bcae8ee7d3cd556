import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'
import {parseAllDocuments} from 'yaml'

import {isStatus, KubeApiError} from '../../src/lib/kube/api-error.js'
import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, createTopology, ensureNamespace, exists, nodeFeaturePath, resetCluster, seedNodesWithObjects, topologyPath, waitUntilGone} from '../../harness/controlplane/seed.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient, startControlPlane} from '../support/cluster.js'
import {GcProcess} from '../support/gc-process.js'
import {upsert} from '../support/rbac.js'
import {rejection} from '../support/thrown.js'

const leaseFlags = ['--leader-elect', '--leader-elect-namespace', 'gc-ha', '--leader-elect-lease-duration', '3s', '--leader-elect-renew-deadline', '2s', '--leader-elect-retry-period', '250ms']

const seedNodes = (client: KubeClient, names: string[]): Promise<void> => seedNodesWithObjects(client, names)
const gone = waitUntilGone

describe('gc run: leader election with two replicas', function () {
  this.timeout(90_000)
  let plane: ControlPlane
  let client: KubeClient
  const running: GcProcess[] = []

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
    await ensureNamespace(client, 'gc-ha')
  })

  beforeEach(async () => {
    await resetCluster(client)
    try {
      await client.request('DELETE', '/apis/coordination.k8s.io/v1/namespaces/gc-ha/leases/nfdctl-gc')
    } catch (error) {
      if (!isStatus(error, 'NotFound')) throw error
    }
  })

  afterEach(async () => {
    await Promise.all(running.splice(0).map((gc) => gc.stop('SIGKILL')))
  })

  after(() => client?.close())

  const start = async (): Promise<GcProcess> => {
    const gc = await GcProcess.start(['--kubeconfig', plane.kubeconfig, '--interval', '1s', '--grace-period', '0', ...leaseFlags])
    running.push(gc)
    return gc
  }
  const leaderOf = async (replicas: GcProcess[]): Promise<{leader: GcProcess; standby: GcProcess}> => {
    // Both up (their health servers listen before this line), then exactly one leads.
    for (const replica of replicas) await replica.waitForLog('start-up', (l) => l.msg === 'gc run starting')
    const leader = await waitFor(
      'one leader',
      async () => {
        const leaders = replicas.filter((r) => r.logs.some((l) => l.msg === 'became leader'))
        return leaders.length === 1 ? leaders[0] : undefined
      },
      {timeoutMs: 15_000},
    )
    return {leader, standby: replicas.find((r) => r !== leader)!}
  }

  it('exactly one replica deletes; killing it hands over to the other', async function () {
    await seedNodes(client, ['h1', 'h2', 'h3'])
    const replicas = [await start(), await start()]
    const {leader, standby} = await leaderOf(replicas)

    await createNodeFeature(client, 'nfd', 'gone-1', 'gone-1')
    await createTopology(client, 'gone-1')
    await gone(client, [nodeFeaturePath('nfd', 'gone-1'), topologyPath('gone-1')], 5000, 'stale objects collected by the leader')
    // The log lines travel through a pipe and may trail the API by a moment.
    await waitFor("the leader's deletion logs", async () => leader.count((l) => l.msg === 'deleted stale object') === 2, {timeoutMs: 3000}).catch((error: Error) => {
      throw new Error(`${error.message}\nleader:\n${leader.transcript()}\nstandby:\n${standby.transcript()}`)
    })
    expect(standby.count((l) => l.msg === 'deleted stale object')).to.equal(0)
    expect(await standby.metric('nfd_gc_leader')).to.equal(0)
    expect(await leader.metric('nfd_gc_leader')).to.equal(1)
    expect((await standby.get('/readyz')).body).to.contain('standing by')

    // A crash, not a clean stop: the lease is not released, so the standby waits for it to expire (3 s).
    const killedAt = Date.now()
    await leader.stop('SIGKILL')
    await standby.waitForLog('takeover', (l) => l.msg === 'became leader', 10_000)
    const takeoverMs = Date.now() - killedAt
    expect(takeoverMs).to.be.within(2000, 8000)

    await createNodeFeature(client, 'nfd', 'gone-2', 'gone-2')
    await gone(client, [nodeFeaturePath('nfd', 'gone-2')], 5000, 'stale object collected by the new leader')
    await standby.waitForLog("the new leader's deletion log", (l) => l.msg === 'deleted stale object' && l.name === 'gone-2', 3000)
  })

  it('a leader stopped with SIGTERM releases the lease, so the standby takes over at once', async function () {
    await seedNodes(client, ['r1'])
    const replicas = [await start(), await start()]
    const {leader, standby} = await leaderOf(replicas)

    const stoppedAt = Date.now()
    expect(await leader.stop('SIGTERM')).to.equal(0)
    expect(leader.logs.map((l) => l.msg)).to.include('released the leader lease')
    await standby.waitForLog('takeover', (l) => l.msg === 'became leader', 10_000)
    expect(Date.now() - stoppedAt, 'takeover without waiting for the 3 s lease to expire').to.be.lessThan(2500)
    const lease = await client.request<{spec: {holderIdentity: string; leaseTransitions: number}}>('GET', '/apis/coordination.k8s.io/v1/namespaces/gc-ha/leases/nfdctl-gc')
    expect(lease.spec.holderIdentity).to.match(/_[0-9a-f]{8}$/)
    expect(lease.spec.leaseTransitions).to.equal(1)
  })
})

describe('gc run: the RBAC in deploy/ is enough, and no broader', function () {
  this.timeout(60_000)
  let plane: ControlPlane
  let client: KubeClient
  let gc: GcProcess | undefined

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await resetCluster(client)
    await ensureNamespace(client, 'nfd')
    await ensureNamespace(client, 'node-feature-discovery')
  })

  after(async () => {
    await gc?.stop('SIGKILL')
    client?.close()
  })

  it('runs with leader election as an identity bound to exactly deploy/gc/rbac/rbac.yaml', async function () {
    const docs = parseAllDocuments(await readFile(fileURLToPath(new URL('../../deploy/gc/rbac/rbac.yaml', import.meta.url)), 'utf8')).map(
      (d) => d.toJS() as {kind: string; metadata: {name: string}; rules?: unknown[]},
    )
    const clusterRole = docs.find((d) => d.kind === 'ClusterRole')!
    const role = docs.find((d) => d.kind === 'Role')!
    // No broader than needed: exactly these verbs, and nothing cluster-wide beyond them.
    expect(clusterRole.rules).to.deep.equal([
      {apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch']},
      {apiGroups: ['nfd.k8s-sigs.io'], resources: ['nodefeatures'], verbs: ['list', 'delete']},
      {apiGroups: ['topology.node.k8s.io'], resources: ['noderesourcetopologies'], verbs: ['get', 'list', 'delete']},
    ])
    // The Lease by its name only; create cannot be limited to a name (it is in the body), so it stands apart.
    expect(role.rules).to.deep.equal([
      {apiGroups: ['coordination.k8s.io'], resourceNames: ['nfdctl-gc'], resources: ['leases'], verbs: ['get', 'update']},
      {apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create']},
    ])

    // Bind the same rules to a client-certificate user, with the same binding kinds and namespace.
    const user = 'nfdctl-gc-deployed'
    const rbac = '/apis/rbac.authorization.k8s.io/v1'
    const subject = [{apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user}]
    await upsert(client, `${rbac}/clusterroles`, {...clusterRole, metadata: {name: 'test-nfdctl-gc'}})
    await upsert(client, `${rbac}/clusterrolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: {name: 'test-nfdctl-gc'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'test-nfdctl-gc'},
      subjects: subject,
    })
    await upsert(client, `${rbac}/namespaces/node-feature-discovery/roles`, {...role, metadata: {name: 'test-nfdctl-gc-le', namespace: 'node-feature-discovery'}})
    await upsert(client, `${rbac}/namespaces/node-feature-discovery/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {name: 'test-nfdctl-gc-le', namespace: 'node-feature-discovery'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'test-nfdctl-gc-le'},
      subjects: subject,
    })
    const kubeconfig = await plane.kubeconfigFor(user)

    await seedNodes(client, ['d1', 'd2'])
    await createNodeFeature(client, 'nfd', 'swept', 'swept')
    gc = await GcProcess.start(['--kubeconfig', kubeconfig, '--interval', '1h', '--grace-period', '0', '--leader-elect', '--leader-elect-namespace', 'node-feature-discovery'])
    await gc.waitForLog('leadership', (l) => l.msg === 'became leader')
    await gone(client, [nodeFeaturePath('nfd', 'swept')], 10_000, 'sweep as the deployed identity')
    // A node deletion exercises the targeted path (label-selected list, topology GET by name).
    await client.request('DELETE', '/api/v1/nodes/d2')
    await gone(client, [nodeFeaturePath('nfd', 'd2'), topologyPath('d2')], 5000, 'per-node collection as the deployed identity')
    expect(
      gc.logs.filter((l) => l.level === 'warn' || l.level === 'error'),
      gc.transcript(),
    ).to.deep.equal([])
    expect((await gc.get('/readyz')).status).to.equal(200)

    // Another Lease of the namespace (another controller's election) is out of the identity's reach.
    const other = '/apis/coordination.k8s.io/v1/namespaces/node-feature-discovery/leases/another-controller'
    await client.request('POST', '/apis/coordination.k8s.io/v1/namespaces/node-feature-discovery/leases', {
      body: {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name: 'another-controller'}, spec: {holderIdentity: 'them'}},
    })
    const deployed = (await openCluster({kubeconfig}, {burst: 10, qps: 10})).client
    try {
      for (const [what, attempt] of [
        ['read', () => deployed.request('GET', other)],
        ['taken over', () => deployed.request('PUT', other, {body: {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name: 'another-controller'}, spec: {holderIdentity: 'gc'}}})],
      ] as Array<[string, () => Promise<unknown>]>) {
        const error = await rejection(attempt(), KubeApiError)
        expect(error.code, `another Lease ${what}`).to.equal(403)
      }
    } finally {
      deployed.close()
    }
  })
})

describe('gc run: kube-apiserver restarted mid-run (etcd kept)', function () {
  this.timeout(120_000)
  let plane: ControlPlane
  let client: KubeClient
  let gc: GcProcess | undefined

  before(async function () {
    plane = await startControlPlane(this)
    client = await plane.client()
    await ensureNamespace(client, 'nfd')
  })

  after(async () => {
    await gc?.stop('SIGKILL')
    client?.close()
    await plane?.stop()
  })

  it('recovers, logs the outage once, and converges', async function () {
    await seedNodes(client, ['a1', 'a2', 'a3'])
    gc = await GcProcess.start(['--kubeconfig', plane.kubeconfig, '--interval', '2s', '--grace-period', '0'])
    await gc.waitForLog('first sweep', (l) => l.msg === 'sweep done')

    await plane.restartApiserver(3000)
    await gc.waitForLog('reconnect', (l) => l.msg === 'watch reconnected', 30_000)

    // Changes after the restart: a deleted node, and a stale object for a node that never existed.
    client.close()
    client = await plane.client()
    await client.request('DELETE', '/api/v1/nodes/a3')
    await createNodeFeature(client, 'nfd', 'after-restart', 'nowhere')
    await gone(client, [nodeFeaturePath('nfd', 'a3'), topologyPath('a3'), nodeFeaturePath('nfd', 'after-restart')], 10_000, 'convergence after the restart')
    expect(await exists(client, nodeFeaturePath('nfd', 'a1'))).to.equal(true)
    // State changes are logged, not every retry.
    expect(gc.count((l) => l.msg === 'watch connection lost; retrying with back-off')).to.equal(1)
    expect(gc.count((l) => l.msg === 'watch reconnected')).to.equal(1)
    await waitFor('ready again', async () => (await gc!.get('/readyz')).status === 200, {timeoutMs: 10_000})
  })
})
