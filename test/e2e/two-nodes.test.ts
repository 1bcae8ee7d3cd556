import {expect} from 'chai'
import {lstat, mkdir, mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {KubeApiError} from '../../src/lib/kube/api-error.js'
import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {placeManifest, readManifests} from '../../harness/controlplane/manifests.js'
import {createNodeFeature, exists, nodeFeaturePath} from '../../harness/controlplane/seed.js'
import {claimPodManifest, claimTemplateManifest, draAgentArgs, limitPodManifest, SerialDisks} from '../../harness/devices/dra-agent.js'
import {BackedLoops, canUseLoopControl, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {nodeIp, nodeIpOf} from '../../harness/node/netns.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {runEvery} from '../support/run-end.js'
import {type FurtherNode, startSecondNode, testNode} from '../support/test-node.js'
import {rejection} from '../support/thrown.js'

// Loop devices 490-499 belong to these tests: loop490 is node A's disk, loop491 node B's. Both agents see
// every loop device of the machine; each has its own udev database, which gives only its node's disk the
// serial the class matches, so each node's pool holds its own disk alone.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const driver = 'devices.nfdctl.io'
const system = 'nfdctl-system'
const consumers = 'nfdctl-two-nodes'
const className = 'twonode'
const draClass = `${className}.${driver}`
const policies = ['nfdctl-agent-own-node-status', 'nfdctl-agent-own-node-slices', 'nfdctl-agent-dra-device-classes', 'nfdctl-agent-own-node-claims']

interface Slice {
  metadata: {name: string; managedFields?: Array<{manager: string}>}
  spec: {nodeName: string; pool: {name: string}; devices?: Array<{name: string}>}
}
interface ClassStatusEntry {
  node: string
  devices: Array<{devName: string}>
}
interface Claim {
  metadata: {name: string; managedFields?: Array<{manager: string; subresource?: string}>}
  status?: {
    allocation?: {devices?: {results?: Array<{device: string; pool: string}>}}
    devices?: Array<{device: string; pool: string; conditions?: Array<{type: string; status: string}>}>
  }
}
interface PodStatus {
  status?: {conditions?: Array<{type: string; status: string; reason?: string; message?: string}>}
}
interface LogLine {
  msg: string
  nodes?: string[]
  deleted?: number
}

/** One of the two nodes: its harness node, its agent's udev database and disk, the agent and its credentials. */
interface Side {
  readonly label: 'a' | 'b'
  readonly env: NodeEnv
  readonly loop: number
  disks: SerialDisks
  kubeconfig: string
  client: KubeClient
  agent?: CliProcess
}

const refusal = (action: () => Promise<unknown>): Promise<KubeApiError> => rejection(action(), KubeApiError)

describe('two nodes on one control plane, each with its own agent (the DRA driver) under its own service account token', function () {
  let second: FurtherNode | undefined
  let dir: string
  let loops: BackedLoops
  let a: Side
  let b: Side
  const pods: string[] = []
  let startup: {ms: number; rssMiB: number}

  const admin = (): KubeClient => a.env.client
  const slicesOf = async (node: string): Promise<Slice[]> =>
    (await admin().request<{items: Slice[]}>('GET', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${node},spec.driver=${driver}`}})).items
  const devicesOf = async (node: string): Promise<string[]> => (await slicesOf(node)).flatMap((s) => (s.spec.devices ?? []).map((d) => d.name)).sort()
  const classEntries = async (): Promise<ClassStatusEntry[]> => (await admin().request<{status?: {nodes?: ClassStatusEntry[]}}>('GET', `${classesPath}/${className}`)).status?.nodes ?? []
  const claimOf = async (pod: string): Promise<Claim> => {
    const found = await admin().request<{status?: {resourceClaimStatuses?: Array<{resourceClaimName?: string}>}}>('GET', `/api/v1/namespaces/${consumers}/pods/${pod}`)
    const name = found.status?.resourceClaimStatuses?.[0]?.resourceClaimName
    if (name === undefined) throw new Error(`pod ${pod} has no claim`)
    return admin().request<Claim>('GET', `${dra}/namespaces/${consumers}/resourceclaims/${name}`)
  }
  const createClaimPod = async (name: string, nodeName?: string): Promise<void> => {
    pods.push(`${consumers}/${name}`)
    await admin().request('POST', `/api/v1/namespaces/${consumers}/pods`, {body: claimPodManifest(name, nodeName, {template: 'one-disk'})})
  }

  /** A busybox pod asking by limit for one device of the class (its DRA DeviceClass carries the extended resource name). */
  const createLimitPod = async (name: string): Promise<void> => {
    pods.push(`${consumers}/${name}`)
    await admin().request('POST', `/api/v1/namespaces/${consumers}/pods`, {body: limitPodManifest(name, `${driver}/${className}`)})
  }

  /**
   * A token of deploy/agent's service account bound to a pod on `side`'s node, as the DaemonSet pod's projected
   * token is: it carries the node's name (authentication.kubernetes.io/node-name), which the policies read.
   */
  const agentCredentials = async (side: Side): Promise<void> => {
    const podName = `token-${side.label}`
    const pod = await admin().request<{metadata: {uid: string}}>('POST', `/api/v1/namespaces/${system}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: podName},
        spec: {
          automountServiceAccountToken: false,
          containers: [{command: ['sleep', '3600'], image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'main'}],
          nodeName: side.env.node.name,
          serviceAccountName: 'nfdctl-agent',
          terminationGracePeriodSeconds: 1,
        },
      },
    })
    const request = await admin().request<{status: {token: string}}>('POST', `/api/v1/namespaces/${system}/serviceaccounts/nfdctl-agent/token`, {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {boundObjectRef: {apiVersion: 'v1', kind: 'Pod', name: podName, uid: pod.metadata.uid}, expirationSeconds: 3600},
      },
    })
    side.kubeconfig = await side.env.plane.kubeconfigWithToken(`agent-${side.label}`, request.status.token)
    side.client = (await openCluster({kubeconfig: side.kubeconfig}, {burst: 10, qps: 10})).client
  }

  const startAgent = async (side: Side): Promise<void> => {
    const udevDir = join(dir, side.label, 'udev')
    side.agent = new CliProcess(draAgentArgs(side.env.node, {kubeconfig: side.kubeconfig, stateDir: join(dir, side.label, 'state'), udevDir}))
    await side.agent.waitForLine<LogLine>(`node ${side.label}'s agent registered its DRA driver`, (l) => l.msg.includes('registered with kubelet'), 30_000)
  }

  before(async function () {
    this.timeout(10 * 60_000)
    const first = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    const started = performance.now()
    second = await startSecondNode(this)
    startup = {ms: performance.now() - started, rssMiB: ((await rssKiB(second.env.node.kubelet.pid)) + (await rssKiB(second.env.node.containerd.pid))) / 1024}
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-two-nodes-'))
    loops = new BackedLoops(dir)
    a = {disks: new SerialDisks(join(dir, 'a', 'udev'), 'nfdctl-2n'), env: first, label: 'a', loop: 490} as Side
    b = {disks: new SerialDisks(join(dir, 'b', 'udev'), 'nfdctl-2n'), env: second.env, label: 'b', loop: 491} as Side
    for (const side of [a, b]) await mkdir(side.disks.udevDir, {recursive: true})

    // deploy/agent's and deploy/agent-dra's service account, roles and own-node policies, as applied by kustomize
    // (the annotation policy judges every pod of the cluster, and no pod here takes a class by annotation).
    for (const [component, files] of [
      ['agent', ['namespace.yaml', 'rbac.yaml', 'status-policy.yaml']],
      ['agent-dra', ['rbac.yaml', 'slice-policy.yaml', 'device-class-policy.yaml', 'claim-status-policy.yaml']],
    ] as const) {
      const {docs, namespace} = await readManifests(component, files)
      for (const {doc} of docs) {
        const {body, collection} = placeManifest(doc, namespace)!
        // Another suite's deploy/agent install may still be there (this one removes its own at the end).
        await admin()
          .request('POST', collection, {body})
          .catch((error: unknown) => {
            if (!(error instanceof KubeApiError && error.code === 409)) throw error
          })
      }
    }
    await createNamespace(first, consumers)
    await admin().request('POST', classesPath, {
      body: {
        apiVersion: 'devices.nfdctl.io/v1alpha1',
        kind: 'DeviceClass',
        metadata: {name: className},
        spec: {allocation: 'DRA', match: [{devName: 'loop49[0-9]', properties: {ID_SERIAL: 'nfdctl-2n-*'}, subsystem: 'block'}]},
      },
    })
    await admin().request('POST', `${dra}/namespaces/${consumers}/resourceclaimtemplates`, {body: claimTemplateManifest('one-disk', draClass)})
    for (const side of [a, b]) {
      await side.disks.record(side.loop, side.label)
      await loops.add(side.loop)
      await agentCredentials(side)
      await startAgent(side)
    }
  })

  after(async function () {
    this.timeout(5 * 60_000)
    if (process.env.NFDCTL_DEBUG_AGENT) for (const side of [a, b]) if (side?.agent) console.log(side.agent.transcript())
    if (a === undefined) {
      await second?.stop()
      return
    }
    const sides = [a, b].filter((side): side is Side => side !== undefined)
    await runEvery([
      ...sides.map((side) => async () => side.agent?.stop('SIGTERM')),
      () => deletePods(a.env, pods.splice(0)),
      () =>
        admin()
          .request('DELETE', `${classesPath}/${className}`)
          .catch(() => {}),
      ...sides.map((side) => () => admin().request('DELETE', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${side.env.node.name},spec.driver=${driver}`}})),
      ...policies.flatMap((name) => [
        () =>
          admin()
            .request('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${name}`)
            .catch(() => {}),
        () =>
          admin()
            .request('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${name}`)
            .catch(() => {}),
      ]),
      ...['nfdctl-agent', 'nfdctl-agent-dra'].flatMap((name) => [
        () =>
          admin()
            .request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`)
            .catch(() => {}),
        () =>
          admin()
            .request('DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`)
            .catch(() => {}),
      ]),
      () => deletePods(a.env, [`${system}/token-a`, `${system}/token-b`]),
      ...[system, consumers].map(
        (namespace) => () =>
          admin()
            .request('DELETE', `/api/v1/namespaces/${namespace}`)
            .catch(() => {}),
      ),
      ...(loops?.plugged ?? []).map((index) => () => loops.drop(index)),
      async () => {
        for (const side of sides) side.client?.close()
      },
      async () => second?.stop(),
      async () => {
        if (dir) await rm(dir, {force: true, recursive: true})
      },
    ])
  })

  it('both Nodes are Ready, each at its own address, and each kubelet has a device-plugin directory of its own', async function () {
    for (const [side, address] of [
      [a, nodeIp],
      [b, nodeIpOf(1)],
    ] as const) {
      const node = await admin().request<{status: {addresses: Array<{type: string; address: string}>; conditions: Array<{type: string; status: string}>}}>('GET', `/api/v1/nodes/${side.env.node.name}`)
      expect(node.status.conditions.find((c) => c.type === 'Ready')?.status, side.label).to.equal('True')
      expect(node.status.addresses, side.label).to.deep.include({address, type: 'InternalIP'})
    }
    // Each kubelet made its own registration socket; node B's start did not clean node A's directory.
    const [socketA, socketB] = await Promise.all([a, b].map((side) => lstat(join(side.env.node.pluginDir, 'kubelet.sock'))))
    expect(socketA.isSocket() && socketB.isSocket()).to.equal(true)
    expect(socketA.ino).to.not.equal(socketB.ino)
    process.stderr.write(`      second node: Ready ${(startup.ms / 1000).toFixed(1)} s after its start, kubelet + containerd RSS ${startup.rssMiB.toFixed(0)} MiB\n`)
  })

  it("each agent publishes its own node's pool, and the DeviceClass status lists both nodes", async function () {
    for (const side of [a, b]) {
      const node = side.env.node.name
      await waitFor(`node ${side.label}'s pool lists its disk`, async () => (await devicesOf(node)).length > 0, {timeoutMs: 10_000})
      expect(await devicesOf(node), side.label).to.deep.equal([side.disks.deviceOf(side.label)])
      const slices = await slicesOf(node)
      expect(slices.map((s) => s.spec.pool.name)).to.deep.equal([node])
    }
    const entries = await waitFor(
      'both nodes in the DeviceClass status',
      async () => {
        const found = await classEntries()
        return found.length === 2 && found.every((e) => e.devices.length === 1) ? found : undefined
      },
      {timeoutMs: 10_000},
    )
    expect(Object.fromEntries(entries.map((e) => [e.node, e.devices.map((d) => d.devName)]))).to.deep.equal({
      [a.env.node.name]: ['loop490'],
      [b.env.node.name]: ['loop491'],
    })
  })

  it("a claim whose class's only free device is on node B lands on node B, and its container reads that device", async function () {
    this.timeout(3 * 60_000)
    await createClaimPod('on-a', a.env.node.name)
    await waitForPod(a.env, `${consumers}/on-a`, 90_000)
    expect((await claimOf('on-a')).status?.allocation?.devices?.results?.map((r) => [r.pool, r.device])).to.deep.equal([[a.env.node.name, a.disks.deviceOf('a')]])

    await createClaimPod('anywhere')
    const running = await waitForPod(b.env, `${consumers}/anywhere`, 90_000)
    const placed = await admin().request<{spec: {nodeName: string}}>('GET', `/api/v1/namespaces/${consumers}/pods/anywhere`)
    expect(placed.spec.nodeName).to.equal(b.env.node.name)
    expect((await claimOf('anywhere')).status?.allocation?.devices?.results?.map((r) => [r.pool, r.device])).to.deep.equal([[b.env.node.name, b.disks.deviceOf('b')]])
    await waitFor('the pod on node B reads /dev/loop491', async () => (await readLoop(b.env.node, running.containerId, b.loop)) === loopData(b.loop), {intervalMs: 50, timeoutMs: 15_000})
    // Node B's agent reported the device Ready, under its own node's field manager.
    const claim = await waitFor('the claim status Ready', async () => {
      const found = await claimOf('anywhere')
      return found.status?.devices?.some((d) => d.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) ? found : undefined
    })
    expect(claim.metadata.managedFields?.filter((f) => f.subresource === 'status').map((f) => f.manager)).to.include(`nfdctl-dra-${b.env.node.name}`)
  })

  it("a pod asking by limit lands on the node whose pool has the free device and reads it; one more stays Pending: neither node's pool has a device for it", async function () {
    this.timeout(3 * 60_000)
    // Node A's disk is freed (its claim goes with the pod); node B's stays with `anywhere`.
    await deletePods(a.env, [`${consumers}/on-a`])
    await waitFor('no claim holds node A’s disk', async () => {
      const claims = await admin().request<{items: Claim[]}>('GET', `${dra}/namespaces/${consumers}/resourceclaims`)
      return claims.items.every((c) => !c.status?.allocation?.devices?.results?.some((r) => r.pool === a.env.node.name))
    })
    await createLimitPod('by-limit')
    const running = await waitForPod(a.env, `${consumers}/by-limit`, 90_000)
    const placed = await admin().request<{spec: {nodeName: string}; status: {extendedResourceClaimStatus?: {resourceClaimName: string}}}>('GET', `/api/v1/namespaces/${consumers}/pods/by-limit`)
    expect(placed.spec.nodeName).to.equal(a.env.node.name)
    const claimName = placed.status.extendedResourceClaimStatus?.resourceClaimName
    expect(claimName, "the scheduler's claim for the limit").to.be.a('string')
    const claim = await admin().request<Claim>('GET', `${dra}/namespaces/${consumers}/resourceclaims/${claimName}`)
    expect(claim.status?.allocation?.devices?.results?.map((r) => [r.pool, r.device])).to.deep.equal([[a.env.node.name, a.disks.deviceOf('a')]])
    await waitFor('the limit pod on node A reads /dev/loop490', async () => (await readLoop(a.env.node, running.containerId, a.loop)) === loopData(a.loop), {intervalMs: 50, timeoutMs: 15_000})

    await createLimitPod('one-too-many')
    const condition = await waitFor(
      'one-too-many unschedulable',
      async () => (await admin().request<PodStatus>('GET', `/api/v1/namespaces/${consumers}/pods/one-too-many`)).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'),
      {timeoutMs: 30_000},
    )
    expect(condition.reason).to.equal('Unschedulable')
    expect(condition.message).to.match(/^0\/2 nodes are available/)
    await deletePods(a.env, [`${consumers}/one-too-many`])
  })

  it("each agent's credentials may write only its own node's slices, class status entry and claim statuses: the shipped policies refuse the other node's", async function () {
    for (const [self, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const me = self.env.node.name
      const them = other.env.node.name
      const slice = await refusal(() =>
        self.client.request('PATCH', `${dra}/resourceslices/${them}-${driver}-intruder`, {
          body: {
            apiVersion: 'resource.k8s.io/v1',
            kind: 'ResourceSlice',
            metadata: {name: `${them}-${driver}-intruder`},
            spec: {devices: [], driver, nodeName: them, pool: {generation: 1, name: them, resourceSliceCount: 1}},
          },
          contentType: 'application/apply-patch+yaml',
          query: {fieldManager: 'nfdctl-agent', force: true},
        }),
      )
      expect(slice.code, slice.serverMessage).to.equal(403)
      expect(slice.serverMessage)
        .to.contain("ValidatingAdmissionPolicy 'nfdctl-agent-own-node-slices'")
        .and.contain(`the nfdctl agent of node ${me} may write only the ResourceSlices of its own node, not those of node ${them}`)

      const before = await classEntries()
      // The other node's entry emptied, everything else as it is.
      const theirs = before.findIndex((e) => e.node === them)
      const status = await refusal(() =>
        self.client.request('PATCH', `${classesPath}/${className}/status`, {body: [{op: 'replace', path: `/status/nodes/${theirs}/devices`, value: []}], contentType: 'application/json-patch+json'}),
      )
      expect(status.code, status.serverMessage).to.equal(403)
      expect(status.serverMessage).to.contain("ValidatingAdmissionPolicy 'nfdctl-agent-own-node-status'").and.contain(`the nfdctl agent of node ${me} may write only its own entry of status.nodes`)
      expect(await classEntries()).to.deep.equal(before)
    }

    // The claim of `anywhere` is allocated on node B: node A's agent is refused its status, node B's may write it.
    // On 1.37 the API server's per-driver check refuses it first: the shipped role grants resourceclaims/driver
    // only as associated-node, the node the token names (nfdctl-agent-own-node-claims is the refusal on 1.34
    // and 1.35, which lack that check: test/integration/admission-policies.test.ts).
    const claim = await claimOf('anywhere')
    const claimPath = `${dra}/namespaces/${consumers}/resourceclaims/${claim.metadata.name}/status`
    const stolen = await refusal(() => a.client.request('PATCH', claimPath, {body: {status: {devices: []}}, contentType: 'application/merge-patch+json'}))
    expect(stolen.code, stolen.serverMessage).to.equal(422)
    expect(stolen.serverMessage).to.contain('changing status.devices requires resource="resourceclaims/driver"').and.contain('cannot arbitrary-node:patch resource "resourceclaims/driver"')
    // The same change by node B's agent passes authorization and every policy (a dry run: nothing is stored).
    await b.client.request('PATCH', claimPath, {body: {status: {devices: []}}, contentType: 'application/merge-patch+json', query: {dryRun: 'All'}})
    expect((await claimOf('anywhere')).status?.devices).to.deep.equal(claim.status?.devices)
  })

  // Last: it stops node B.
  it("gc run (the shipped Deployment's arguments) collects node B's NodeFeature once its kubelet is stopped and its Node deleted, and keeps node A's", async function () {
    this.timeout(3 * 60_000)
    for (const side of [a, b]) await createNodeFeature(admin(), consumers, `features-${side.label}`, side.env.node.name)
    // As deploy/gc runs it, but with metrics on a free loopback port, the Lease in this suite's namespace, and no grace period.
    const gc = new CliProcess([
      'gc',
      'run',
      '--kubeconfig',
      a.env.plane.kubeconfig,
      '--leader-elect',
      '--leader-elect-namespace',
      consumers,
      '--interval=1h',
      '--grace-period=0',
      '--metrics-bind-address',
      `127.0.0.1:${await freePort()}`,
      '--log-format=json',
    ])
    try {
      // After the first sweep (done, or refused for objects other suites left): the node's deletion is then a job of its own.
      await gc.waitForLine<LogLine>('the first sweep', (l) => l.msg === 'sweep done' || l.msg.includes('nothing deleted'), 60_000)
      await b.agent?.stop('SIGTERM')
      await second?.stop()
      await admin().request('DELETE', `/api/v1/nodes/${b.env.node.name}`)
      const collected = await gc.waitForLine<LogLine>("node B's objects collected", (l) => l.msg === 'collected objects of deleted nodes', 30_000)
      expect(collected.value).to.deep.include({deleted: 1, nodes: [b.env.node.name]})
      expect(await exists(admin(), nodeFeaturePath(consumers, 'features-b'))).to.equal(false)
      expect(await exists(admin(), nodeFeaturePath(consumers, 'features-a'))).to.equal(true)
    } finally {
      expect(await gc.stop('SIGTERM'), gc.transcript()).to.equal(0)
    }
  })
})

/** A process's resident memory in KiB (VmRSS), 0 once it is gone. */
async function rssKiB(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
}
