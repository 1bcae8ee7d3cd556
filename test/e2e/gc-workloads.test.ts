import {expect} from 'chai'

import {createNamespace, podLog, type NodeEnv} from '../../harness/node/pods.js'
import {containerIdOf, isReady, kubectl, livePods, loadImage, memoryPeak, waitForReadyPods, writeOverlay, type NodeImage} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {nfdctlImage} from '../support/nfdctl-image.js'
import {testNode} from '../support/test-node.js'

const namespace = 'node-feature-discovery'
const selector = 'app.kubernetes.io/name=nfdctl-gc'
const nodeFeatures = `/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/${namespace}/nodefeatures`

interface Lease {
  spec: {holderIdentity?: string; leaseTransitions?: number}
}

// What an operator runs: the image built by `npm run image`, given to the node's containerd, and
// `kubectl apply -k` of an overlay that names it. Only the image differs from the shipped files.
describe('deploy/gc on the real node: the shipped Deployment and CronJob, run from the built image', function () {
  let env: NodeEnv
  let image: NodeImage
  const ghosts = ['ghost-a', 'ghost-b', 'ghost-c']

  /** Nodes with no kubelet: only their existence matters to the collector; a taint keeps pods off them. */
  const createGhostNode = async (name: string): Promise<void> => {
    await env.client.request('POST', '/api/v1/nodes', {
      body: {metadata: {labels: {'nfdctl-test/ghost': 'true'}, name}, spec: {taints: [{effect: 'NoSchedule', key: 'nfdctl-test/ghost'}], unschedulable: true}},
    })
  }
  const createNodeFeature = async (name: string, node: string): Promise<void> => {
    await env.client.request('POST', nodeFeatures, {
      body: {apiVersion: 'nfd.k8s-sigs.io/v1alpha1', kind: 'NodeFeature', metadata: {labels: {'nfd.node.kubernetes.io/node-name': node}, name}, spec: {}},
    })
  }
  const nodeFeatureNames = async (): Promise<string[]> => (await env.client.request<{items: Array<{metadata: {name: string}}>}>('GET', nodeFeatures)).items.map((i) => i.metadata.name).sort()
  /** The pod holding the Lease: the identity is the pod's hostname (its name) and a random suffix. */
  const leaderPod = async (): Promise<string | undefined> => {
    const lease = await env.client.request<Lease>('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/nfdctl-gc`).catch(() => undefined)
    return lease?.spec.holderIdentity?.replace(/_[0-9a-f]+$/, '')
  }

  before(async function () {
    this.timeout(15 * 60_000)
    env = await testNode(this)
    image = await nfdctlImage(this)
    await loadImage(env, image)
    await createNamespace(env, namespace)
    for (const ghost of ghosts) await createGhostNode(ghost)
    // A live node's objects, so that one stale object is a small share of what a sweep scans.
    for (const name of [env.node.name, 'live-extra-1', 'live-extra-2']) await createNodeFeature(name, env.node.name)
    for (const ghost of ghosts) await createNodeFeature(ghost, ghost)
  })

  after(async function () {
    this.timeout(120_000)
    if (env === undefined) return
    await kubectl(env, 'delete', 'namespace', namespace, '--wait=true', '--timeout=90s').catch(() => '')
    for (const ghost of ghosts) await env.client.request('DELETE', `/api/v1/nodes/${ghost}`).catch(() => {})
    await kubectl(env, 'delete', 'clusterrole,clusterrolebinding', 'nfdctl-gc', '--ignore-not-found').catch(() => '')
  })

  it("kubectl apply -k deploy/gc: two replicas Ready by kubelet's probes, one leads and deletes a stale object; delete the leader pod, another pod takes over and deletes the next", async function () {
    this.timeout(6 * 60_000)
    await kubectl(env, 'apply', '-k', await writeOverlay({component: 'gc', image}))
    const pods = await waitForReadyPods(env, namespace, selector, 2)
    const leader = await waitFor('a leader', async () => {
      const name = await leaderPod()
      return pods.some((p) => p.metadata.name === name) ? name : undefined
    })
    const standby = pods.find((p) => p.metadata.name !== leader)!
    const leaderUid = pods.find((p) => p.metadata.name === leader)!.metadata.uid

    // The node goes: the leader deletes its NodeFeature once the grace period (30 s) has passed.
    await env.client.request('DELETE', '/api/v1/nodes/ghost-a')
    await waitFor('NodeFeature ghost-a deleted', async () => !(await nodeFeatureNames()).includes('ghost-a'), {intervalMs: 500, timeoutMs: 90_000})
    expect(await nodeFeatureNames()).to.deep.equal(['ghost-b', 'ghost-c', env.node.name, 'live-extra-1', 'live-extra-2'].sort())
    expect(await podLog(env, {uid: leaderUid}, 'gc')).to.match(/ghost-a/)
    expect(await podLog(env, standby.metadata, 'gc')).to.not.match(/ghost-a/)

    // The leader pod goes as a drain would take it (SIGTERM): it hands the Lease over, and another pod leads
    // (the standby, or the Deployment's replacement if it wins the race).
    const deleted = performance.now()
    await kubectl(env, '-n', namespace, 'delete', 'pod', leader!, '--wait=false')
    const next = await waitFor(
      'another pod leads',
      async () => {
        const name = await leaderPod()
        return name !== undefined && name !== leader ? (await livePods(env, namespace, selector)).find((p) => p.metadata.name === name) : undefined
      },
      {intervalMs: 100, timeoutMs: 60_000},
    )
    const handoverMs = performance.now() - deleted
    process.stderr.write(`      gc: leader pod deleted → ${next.metadata.name === standby.metadata.name ? 'the standby' : 'the replacement pod'} leads after ${(handoverMs / 1000).toFixed(1)} s\n`)
    // Released on SIGTERM, the Lease is taken at the next retry (2 s), well before it would expire (15 s).
    expect(handoverMs, 'leader pod deleted → another leads (ms)').to.be.below(10_000)
    await env.client.request('DELETE', '/api/v1/nodes/ghost-b')
    await waitFor('NodeFeature ghost-b deleted', async () => !(await nodeFeatureNames()).includes('ghost-b'), {intervalMs: 500, timeoutMs: 90_000})
    expect(await podLog(env, next.metadata, 'gc')).to.match(/ghost-b/)
    expect(await nodeFeatureNames()).to.deep.equal(['ghost-c', env.node.name, 'live-extra-1', 'live-extra-2'].sort())

    // Two pods Ready again (the new leader and a standby), and kubelet's liveness probe never restarted anyone.
    const after = await waitForReadyPods(env, namespace, selector, 2)
    expect(after.map((p) => p.metadata.name)).to.include(next.metadata.name)
    for (const pod of await livePods(env, namespace, selector)) {
      expect(isReady(pod), pod.metadata.name).to.equal(true)
      expect(pod.status.containerStatuses?.[0].restartCount, `${pod.metadata.name} restarts`).to.equal(0)
    }
    for (const pod of after) {
      const peak = await memoryPeak(containerIdOf(pod, 'gc'), env)
      process.stderr.write(`      gc pod ${pod.metadata.name}: memory peak ${(peak / 2 ** 20).toFixed(1)} MiB (limit 256 MiB)\n`)
      // 256Mi is sized for 65,000 Nodes; with a handful a collector stays well within half of it.
      expect(peak, 'gc memory peak').to.be.below(128 * 2 ** 20)
    }
    // The disruption controller counts the pods on its own time.
    const budget = await waitFor('the PodDisruptionBudget counts both pods', async () => {
      const pdb = await env.client.request<{status?: {currentHealthy: number; desiredHealthy: number; disruptionsAllowed: number}}>(
        'GET',
        `/apis/policy/v1/namespaces/${namespace}/poddisruptionbudgets/nfdctl-gc`,
      )
      return pdb.status?.currentHealthy === 2 ? pdb.status : undefined
    })
    expect(budget).to.include({currentHealthy: 2, desiredHealthy: 1, disruptionsAllowed: 1})
  })

  it('kubectl apply -k deploy/gc/cronjob, then kubectl create job --from: the Job runs gc once to completion and deletes the stale object', async function () {
    this.timeout(4 * 60_000)
    // The CronJob replaces the Deployment.
    await kubectl(env, '-n', namespace, 'delete', 'deployment', 'nfdctl-gc', '--wait=true')
    await waitFor('no collector pods', async () => (await livePods(env, namespace, selector)).length === 0, {timeoutMs: 60_000})
    await kubectl(env, 'apply', '-k', await writeOverlay({component: 'gc/cronjob', image}))
    await env.client.request('DELETE', '/api/v1/nodes/ghost-c')
    await kubectl(env, '-n', namespace, 'create', 'job', '--from=cronjob/nfdctl-gc-once', 'gc-now')
    const job = await waitFor(
      'Job gc-now complete',
      async () => {
        const j = await env.client.request<{status: {succeeded?: number; failed?: number}}>('GET', `/apis/batch/v1/namespaces/${namespace}/jobs/gc-now`)
        if ((j.status.failed ?? 0) > 0) throw new Error(`Job gc-now failed: ${JSON.stringify(j.status)}`)
        return (j.status.succeeded ?? 0) === 1 ? j : undefined
      },
      {intervalMs: 500, timeoutMs: 120_000},
    )
    expect(job.status.succeeded).to.equal(1)
    expect(await nodeFeatureNames()).to.deep.equal([env.node.name, 'live-extra-1', 'live-extra-2'].sort())
    const [pod] = (await env.client.request<{items: Array<{metadata: {uid: string}}>}>('GET', `/api/v1/namespaces/${namespace}/pods`, {query: {labelSelector: 'job-name=gc-now'}})).items
    expect(await podLog(env, pod.metadata, 'gc')).to.match(/ghost-c\s+ghost-c\s+node does not exist\s+deleted/)
  })
})
