import {expect} from 'chai'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {claimPodManifest, claimTemplateManifest, draAgentArgs, type SerialDisks} from '../../harness/devices/dra-agent.js'
import {type BackedLoops, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {allocatable, createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import type {DoctorReport} from '../../src/lib/doctor/findings.js'
import {clusterGates, describeWhere, kubeMinor} from '../support/kube-version.js'
import {nfdctl} from '../support/run-cli.js'
import {serialDiskNode} from '../support/test-node.js'

// Loop devices 670-689 belong to these tests (the class drax takes loop670-679, the migrated class loop680-689). Each test disk has a udev serial
// (in the agent's own udev database directory), so that plugged in again under another loop number it is the
// same device. The cluster runs with kube-apiserver's, kube-scheduler's and kubelet's v1.37 defaults: no gate.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const className = 'drax'
const draClass = `${className}.devices.nfdctl.io`
const resource = `devices.nfdctl.io/${className}`

interface Claim {
  metadata: {name: string; uid: string; annotations?: Record<string, string>; ownerReferences?: Array<{kind: string; name: string; uid: string; controller?: boolean}>}
  spec: {devices: {requests: Array<{name: string; exactly?: {deviceClassName: string; count?: number}}>}}
  status?: {
    allocation?: {devices?: {results?: Array<{request: string; device: string; pool: string; driver: string}>}}
    devices?: Array<{device: string; conditions?: Array<{type: string; status: string; reason: string}>; data?: {devNode?: string}}>
  }
}
interface PodObject {
  metadata: {name: string; uid: string}
  status?: {
    phase?: string
    conditions?: Array<{type: string; status: string; reason?: string; message?: string}>
    resourceClaimStatuses?: Array<{name: string; resourceClaimName?: string}>
    extendedResourceClaimStatus?: {resourceClaimName: string; requestMappings: Array<{containerName: string; resourceName: string; requestName: string}>}
  }
}
interface LogLine {
  msg: string
}

/** A busybox container `main` that sleeps, asking by limit for `count` devices of the class (by default drax). */
const limitContainer = (count: number, resourceName = resource): object => ({
  command: ['sleep', '3600'],
  image: 'localhost/nfdctl-test/busybox:1',
  imagePullPolicy: 'Never',
  name: 'main',
  resources: {limits: {[resourceName]: String(count)}},
})

// Where the API server drops extendedResourceName (1.34 and 1.35 by default) no pod is served by limit: what the
// class then says is test/e2e/dra-dropped-features.test.ts.
describeWhere(clusterGates.extendedResource, 'DRAExtendedResource is off by default')('a DRA class asked for by limit (extended resources through DRA, KEP-5004) on a real node', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let loops: BackedLoops
  let disks: SerialDisks
  let agent: CliProcess | undefined
  const namespace = 'nfdctl-dra-ext'
  const pods: string[] = []
  /** The loop number each test disk is plugged in at, by DRA device name. */
  const pluggedAt = new Map<string, number>()

  const plug = async (index: number, disk: string): Promise<void> => {
    await disks.record(index, disk)
    await loops.add(index)
    pluggedAt.set(disks.deviceOf(disk), index)
  }
  const unplug = async (index: number): Promise<void> => {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
  }
  const pod = (name: string): Promise<PodObject> => env.client.request<PodObject>('GET', `/api/v1/namespaces/${namespace}/pods/${name}`)
  const claim = (name: string): Promise<Claim> => env.client.request<Claim>('GET', `${dra}/namespaces/${namespace}/resourceclaims/${name}`)
  const allocatedDevice = (c: Claim): string => {
    const results = c.status?.allocation?.devices?.results ?? []
    expect(results, c.metadata.name).to.have.length(1)
    return results[0].device
  }
  /** The pod the Deployment `limit-app` runs now. */
  const deploymentPod = async (): Promise<string> =>
    waitFor('a pod of Deployment limit-app', async () => {
      const list = await env.client.request<{items: PodObject[]}>('GET', `/api/v1/namespaces/${namespace}/pods`, {query: {labelSelector: 'app=limit-app'}})
      return list.items[0]?.metadata.name
    })
  /** Waits until the container `main` reads the test disk at loop<index>. */
  const readsDisk = async (running: RunningPod, index: number): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index}`, async () => (await readLoop(env.node, running.containerId, index)) === loopData(index), {intervalMs: 20, timeoutMs: 10_000})
  }
  const readyCondition = async (claimName: string, device: string): Promise<{status: string; reason: string; devNode?: string} | undefined> => {
    const entry = (await claim(claimName)).status?.devices?.find((d) => d.device === device)
    const ready = entry?.conditions?.find((c) => c.type === 'Ready')
    return ready === undefined ? undefined : {devNode: entry?.data?.devNode, reason: ready.reason, status: ready.status}
  }

  before(async function () {
    this.timeout(120_000)
    ;({dir, disks, env, loops, udevDir} = await serialDiskNode(this, 'nfdctl-dra-ext'))
    await createNamespace(env, namespace)
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: className}, spec: {allocation: 'DRA', match: [{devName: 'loop67[0-9]', subsystem: 'block'}]}},
    })
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {body: claimTemplateManifest('one-disk', draClass)})
    await plug(671, 'a')
    await plug(672, 'b')
    agent = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir}))
    await agent.waitForLine<LogLine>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && agent) console.log(agent.transcript())
    await env.client.request('DELETE', `/apis/apps/v1/namespaces/${namespace}/deployments/limit-app`, {body: {propagationPolicy: 'Background'}}).catch(() => {})
    const left = await env.client.request<{items: PodObject[]}>('GET', `/api/v1/namespaces/${namespace}/pods`).catch(() => ({items: []}))
    await deletePods(env, [...new Set([...pods.splice(0), ...left.items.map((p) => `${namespace}/${p.metadata.name}`)])])
    await agent?.stop('SIGTERM')
    for (const i of loops.plugged) await unplug(i)
    await env.client.request('DELETE', `${classesPath}/${className}`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
    await rm(dir, {force: true, recursive: true})
  })

  it('the resource.k8s.io DeviceClass names the extended resource devices.nfdctl.io/<class>, and no device plugin advertises it', async function () {
    const made = await waitFor('the resource.k8s.io DeviceClass', () => env.client.request<{spec: {extendedResourceName?: string}}>('GET', `${dra}/deviceclasses/${draClass}`).catch(() => undefined))
    expect(made.spec.extendedResourceName).to.equal(resource)
    // kube-scheduler takes a limit to DRA only where the node has none of the resource allocatable.
    const node = await env.client.request<{status?: {allocatable?: Record<string, string>; capacity?: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
    expect(node.status?.capacity?.[resource]).to.equal(undefined)
    expect(node.status?.allocatable?.[resource]).to.equal(undefined)
  })

  it("a Deployment asking by limit runs on the scheduler's claim, and a pod asking by ResourceClaim gets the other device: each container reads its own, never the other's", async function () {
    this.timeout(120_000)
    await env.client.request('POST', `/apis/apps/v1/namespaces/${namespace}/deployments`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {name: 'limit-app'},
        spec: {
          replicas: 1,
          selector: {matchLabels: {app: 'limit-app'}},
          template: {
            metadata: {labels: {app: 'limit-app'}},
            spec: {automountServiceAccountToken: false, containers: [limitContainer(1)], nodeSelector: {'kubernetes.io/hostname': env.node.name}, terminationGracePeriodSeconds: 1},
          },
        },
      },
    })
    const limitName = await deploymentPod()
    const limitPod = await waitForPod(env, `${namespace}/${limitName}`, 60_000)

    // What kube-scheduler wrote: the pod's status names its claim and maps container main's limit to a request.
    const status = (await pod(limitName)).status?.extendedResourceClaimStatus
    expect(status?.requestMappings).to.deep.equal([{containerName: 'main', requestName: 'container-0-request-0', resourceName: resource}])
    const limitClaim = await claim(status!.resourceClaimName)
    expect(limitClaim.metadata.name).to.match(new RegExp(`^${limitName}-extended-resources-`))
    expect(limitClaim.metadata.annotations).to.deep.include({'resource.kubernetes.io/extended-resource-claim': 'true'})
    expect(limitClaim.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid, o.controller])).to.deep.equal([['Pod', limitName, limitPod.uid, true]])
    expect(limitClaim.spec.devices.requests.map((r) => [r.name, r.exactly?.deviceClassName, r.exactly?.count])).to.deep.equal([['container-0-request-0', draClass, 1]])
    const limitDevice = allocatedDevice(limitClaim)

    pods.push(`${namespace}/claimer`)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPodManifest('claimer', env.node.name, {template: 'one-disk'})})
    const claimer = await waitForPod(env, `${namespace}/claimer`, 60_000)
    const claimName = (await pod('claimer')).status?.resourceClaimStatuses?.[0]?.resourceClaimName
    const claimDevice = allocatedDevice(await claim(claimName!))
    expect([limitDevice, claimDevice].sort()).to.deep.equal([disks.deviceOf('a'), disks.deviceOf('b')].sort())

    const limitIndex = pluggedAt.get(limitDevice)!
    const claimIndex = pluggedAt.get(claimDevice)!
    await readsDisk(limitPod, limitIndex)
    await readsDisk(claimer, claimIndex)
    expect(await readLoop(env.node, limitPod.containerId, claimIndex)).to.match(/^failed/)
    expect(await readLoop(env.node, claimer.containerId, limitIndex)).to.match(/^failed/)
    await waitFor('the limit claim Ready', async () => (await readyCondition(limitClaim.metadata.name, limitDevice))?.status === 'True', {timeoutMs: 10_000})
  })

  it('a third pod asking by limit is refused by the scheduler (Pending, FailedScheduling) while both devices are held', async function () {
    this.timeout(60_000)
    pods.push(`${namespace}/third`)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: 'third'},
        spec: {automountServiceAccountToken: false, containers: [limitContainer(1)], nodeSelector: {'kubernetes.io/hostname': env.node.name}, terminationGracePeriodSeconds: 1},
      },
    })
    const condition = await waitFor('third unschedulable', async () => (await pod('third')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {
      timeoutMs: 30_000,
    })
    expect(condition.reason).to.equal('Unschedulable')
    const event = await waitFor('a FailedScheduling event for third', async () => {
      const events = await env.client.request<{items: Array<{reason: string; message: string}>}>('GET', `/api/v1/namespaces/${namespace}/events`, {
        query: {fieldSelector: 'involvedObject.name=third,reason=FailedScheduling'},
      })
      return events.items[0]
    })
    expect(event.message).to.match(/0\/1 nodes are available/)
    expect((await pod('third')).status?.phase).to.equal('Pending')
    expect(await env.client.request<{items: unknown[]}>('GET', `${dra}/namespaces/${namespace}/resourceclaims`).then((l) => l.items.length)).to.equal(2)
  })

  it("unplug and re-plug under another loop number: the limit pod's container reads its device again, and its claim says so", async function () {
    this.timeout(120_000)
    const limitName = await deploymentPod()
    const limitPod = await waitForPod(env, `${namespace}/${limitName}`)
    const claimName = (await pod(limitName)).status!.extendedResourceClaimStatus!.resourceClaimName
    const device = allocatedDevice(await claim(claimName))
    const index = pluggedAt.get(device)!
    const disk = device === disks.deviceOf('a') ? 'a' : 'b'
    await readsDisk(limitPod, index)
    await unplug(index)
    await waitFor('read fails after unplug', async () => (await readLoop(env.node, limitPod.containerId, index)).startsWith('failed'), {intervalMs: 20})
    await waitFor('claim status not Ready', async () => (await readyCondition(claimName, device))?.status === 'False', {timeoutMs: 10_000})
    await plug(675, disk)
    await readsDisk(limitPod, 675)
    expect(await waitFor('claim status Ready again', async () => readyCondition(claimName, device).then((c) => (c?.status === 'True' ? c : undefined)))).to.include({devNode: '/dev/loop675'})
  })

  it("the Deployment gone, its pod's claim goes with it and the pending pod gets the freed device", async function () {
    this.timeout(120_000)
    const limitName = await deploymentPod()
    const claimName = (await pod(limitName)).status!.extendedResourceClaimStatus!.resourceClaimName
    const freed = allocatedDevice(await claim(claimName))
    // Scaled to none first, and deleted only once the ReplicaSet controller has synced replicas 0: a pod deleted
    // under a ReplicaSet it still reads as replicas 1 is replaced, and the new pod, not in the scheduler's
    // back-off as third is, takes the freed device first.
    await env.client.request('PATCH', `/apis/apps/v1/namespaces/${namespace}/deployments/limit-app`, {body: {spec: {replicas: 0}}, contentType: 'application/merge-patch+json'})
    await waitFor('the ReplicaSet of limit-app synced at replicas 0', async () => {
      const sets = await env.client.request<{items: Array<{metadata: {generation?: number}; spec: {replicas?: number}; status?: {observedGeneration?: number}}>}>(
        'GET',
        `/apis/apps/v1/namespaces/${namespace}/replicasets`,
        {query: {labelSelector: 'app=limit-app'}},
      )
      return (sets.items.length > 0 && sets.items.every((r) => r.spec.replicas === 0 && (r.status?.observedGeneration ?? 0) >= (r.metadata.generation ?? 1))) || undefined
    })
    await deletePods(env, [`${namespace}/${limitName}`])
    await env.client.request('DELETE', `/apis/apps/v1/namespaces/${namespace}/deployments/limit-app`, {body: {propagationPolicy: 'Background'}})
    await waitFor(
      `claim ${claimName} deleted`,
      async () =>
        (await claim(claimName).then(
          () => false,
          () => true,
        )) || undefined,
      {timeoutMs: 30_000},
    )
    const third = await waitForPod(env, `${namespace}/third`, 60_000)
    // No pod of the Deployment came between: third was the only one waiting for the device.
    const created = await env.client.request<{items: Array<{involvedObject: {kind: string}}>}>('GET', `/api/v1/namespaces/${namespace}/events`, {
      query: {fieldSelector: 'reason=SuccessfulCreate'},
    })
    expect(created.items.filter((e) => e.involvedObject.kind === 'ReplicaSet')).to.have.length(1)
    const thirdClaim = await claim((await pod('third')).status!.extendedResourceClaimStatus!.resourceClaimName)
    expect(allocatedDevice(thirdClaim)).to.equal(freed)
    await readsDisk(third, pluggedAt.get(freed)!)
  })
  describe('a class switched from Device to DRA while a pod that asks by limit runs', function () {
    const migrated = 'dramig'
    const migratedResource = `devices.nfdctl.io/${migrated}`
    const migratedClass = `${migrated}.devices.nfdctl.io`
    /** The spec of a pod asking by limit for one device of the migrated class. */
    const limitPodSpec = (): object => ({
      automountServiceAccountToken: false,
      containers: [limitContainer(1, migratedResource)],
      nodeSelector: {'kubernetes.io/hostname': env.node.name},
      terminationGracePeriodSeconds: 1,
    })
    const createPod = async (name: string): Promise<void> => {
      pods.push(`${namespace}/${name}`)
      await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: {apiVersion: 'v1', kind: 'Pod', metadata: {name}, spec: limitPodSpec()}})
    }
    const setAllocation = (allocation: 'Device' | 'DRA'): Promise<unknown> =>
      env.client.request('PATCH', `${classesPath}/${migrated}`, {body: {spec: {allocation}}, contentType: 'application/merge-patch+json'})
    const sliceDevices = async (): Promise<string[]> => {
      const list = await env.client.request<{items: Array<{spec: {devices?: Array<{name: string}>}}>}>('GET', `${dra}/resourceslices`, {
        query: {fieldSelector: `spec.nodeName=${env.node.name},spec.driver=devices.nfdctl.io`},
      })
      return list.items.flatMap((s) => s.spec.devices ?? []).map((d) => d.name)
    }
    /** Waits for what the operator waits for after the switch: the DeviceClass with the extended resource, and kubelet's allocatable 0. */
    const switchedToDra = async (): Promise<void> => {
      const made = await waitFor(migratedClass, () => env.client.request<{spec: {extendedResourceName?: string}}>('GET', `${dra}/deviceclasses/${migratedClass}`).catch(() => undefined), {
        timeoutMs: 15_000,
      })
      expect(made.spec.extendedResourceName).to.equal(migratedResource)
      await waitFor(`${migratedResource} allocatable 0`, async () => (await allocatable(env, migratedResource)) === 0, {timeoutMs: 15_000})
    }
    const scheduledThroughDra = async (name: string): Promise<string> => {
      const claimName = (await pod(name)).status?.extendedResourceClaimStatus?.resourceClaimName
      expect(claimName, `${name}'s extendedResourceClaimStatus`).to.be.a('string')
      return allocatedDevice(await claim(claimName!))
    }

    before(async function () {
      this.timeout(60_000)
      await plug(681, 'm')
      await env.client.request('POST', classesPath, {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: migrated}, spec: {allocation: 'Device', match: [{devName: 'loop68[0-9]', subsystem: 'block'}]}},
      })
      await waitFor(`${migratedResource} allocatable 1 (the agent's device plugin)`, async () => (await allocatable(env, migratedResource)) === 1, {timeoutMs: 30_000})
    })

    after(async function () {
      this.timeout(60_000)
      await env.client.request('DELETE', `/apis/apps/v1/namespaces/${namespace}/deployments/modem`, {body: {propagationPolicy: 'Background'}}).catch(() => {})
      await env.client.request('DELETE', `${classesPath}/${migrated}`).catch(() => {})
    })

    // kube-scheduler 1.34 sends a limit to DRA only where the node's allocatable has no entry for the resource,
    // and kubelet keeps a stopped plugin's resource listed (at 0) for good: doctor names the node and the patch,
    // which sticks once kubelet has let the plugin go (5 minutes, its endpointStopGracePeriod).
    if (kubeMinor === 34) {
      it('1.34: after the switch a new pod asking by limit stays Pending (Insufficient) while the node lists the resource at 0; doctor says so with the patch, and once kubelet lets the plugin go and the entry is removed, the pod gets the device through DRA', async function () {
        this.timeout(12 * 60_000)
        await setAllocation('DRA')
        await switchedToDra()
        const stoppedAt = Date.now()
        await createPod('new')
        const pending = await waitFor('new unschedulable', async () => (await pod('new')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {timeoutMs: 30_000})
        expect(pending.message).to.include(`Insufficient ${migratedResource}`)
        const run = await nfdctl<DoctorReport>(['doctor', '--kubeconfig', env.plane.kubeconfig, '-o', 'json'])
        const stale = (JSON.parse(run.stdout) as DoctorReport).findings.find((f) => f.check === `pods asking by limit reach DRA (${migratedResource})`)
        expect(stale).to.include({feature: 'DRA by limit', status: 'fail'})
        expect(stale?.found).to.include(env.node.name)
        expect(stale?.fix).to.include(`kubectl patch node ${env.node.name} --subresource=status --type=json`)
        expect(run.exitCode).to.equal(1)

        // What the fix says, as kubectl would send it: the patch in doctor's fix line, once kubelet let the plugin go.
        const patch = JSON.parse(/-p '(\[.*\])'/.exec(stale!.fix!)![1]) as object[]
        await waitFor(
          'kubelet letting the plugin go (capacity 0)',
          async () => (await env.client.request<{status: {capacity: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)).status.capacity[migratedResource] === '0',
          {intervalMs: 5000, timeoutMs: 7 * 60_000},
        )
        process.stderr.write(`      kubelet let the plugin go ${Math.round((Date.now() - stoppedAt) / 1000)} s after the switch\n`)
        await env.client.request('PATCH', `/api/v1/nodes/${env.node.name}/status`, {body: patch, contentType: 'application/json-patch+json'})
        const fresh = await waitForPod(env, `${namespace}/new`, 60_000)
        expect(await scheduledThroughDra('new')).to.equal(disks.deviceOf('m'))
        await readsDisk(fresh, 681)
        const node = await env.client.request<{status: {allocatable: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
        expect(node.status.allocatable, 'kubelet did not list it again').to.not.have.property(migratedResource)
      })
      return
    }

    it('on the switch the agent takes the device from the running pod (it runs on without it), kubelet takes the resource to 0, the device joins the slice, and a new pod asking by limit gets it through DRA', async function () {
      this.timeout(90_000)
      await createPod('old')
      const old = await waitForPod(env, `${namespace}/old`, 30_000)
      expect((await pod('old')).status?.extendedResourceClaimStatus, 'old got its device from the device plugin').to.equal(undefined)
      await readsDisk(old, 681)

      await setAllocation('DRA')
      // A DRA class's devices are given by claim only: old's limit no longer holds the device, so the agent
      // takes it back (its node and its cgroup rule) in the batch that publishes it, before the slice is written.
      await waitFor('disk m in the slice', async () => (await sliceDevices()).includes(disks.deviceOf('m')) || undefined, {intervalMs: 20, timeoutMs: 15_000})
      expect(await readLoop(env.node, old.containerId, 681)).to.match(/No such file or directory/)
      await switchedToDra()
      expect((await pod('old')).status?.phase).to.equal('Running')

      await createPod('new')
      const fresh = await waitForPod(env, `${namespace}/new`, 30_000)
      expect(await scheduledThroughDra('new')).to.equal(disks.deviceOf('m'))
      await readsDisk(fresh, 681)
      expect(await readLoop(env.node, old.containerId, 681)).to.match(/^failed/)
    })

    it('the documented procedure: the limit workload scaled to 0, then the switch, then scaled back: its new pod gets the device through DRA and a second pod is refused', async function () {
      this.timeout(90_000)
      await deletePods(env, [`${namespace}/old`])
      const fresh = await waitForPod(env, `${namespace}/new`)
      // Back to Device: the DeviceClass goes, the device plugin returns, and the pod that asked through DRA loses its device the same way.
      await setAllocation('Device')
      await waitFor(`${migratedClass} deleted`, () =>
        env.client.request('GET', `${dra}/deviceclasses/${migratedClass}`).then(
          () => undefined,
          () => true,
        ),
      )
      await waitFor(`${migratedResource} allocatable 1 again`, async () => (await allocatable(env, migratedResource)) === 1, {timeoutMs: 30_000})
      const index = pluggedAt.get(disks.deviceOf('m'))!
      await waitFor('new no longer reads disk m', async () => (await readLoop(env.node, fresh.containerId, index)).startsWith('failed') || undefined, {intervalMs: 50, timeoutMs: 10_000})
      await deletePods(env, [`${namespace}/new`])
      const deployment = `/apis/apps/v1/namespaces/${namespace}/deployments/modem`
      const scale = (replicas: number): Promise<unknown> => env.client.request('PATCH', deployment, {body: {spec: {replicas}}, contentType: 'application/merge-patch+json'})
      const modemPods = async (): Promise<string[]> =>
        (await env.client.request<{items: PodObject[]}>('GET', `/api/v1/namespaces/${namespace}/pods`, {query: {labelSelector: 'app=modem'}})).items.map((p) => p.metadata.name)
      await env.client.request('POST', `/apis/apps/v1/namespaces/${namespace}/deployments`, {
        body: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: {name: 'modem'},
          spec: {
            replicas: 1,
            selector: {matchLabels: {app: 'modem'}},
            template: {metadata: {labels: {app: 'modem'}}, spec: limitPodSpec()},
          },
        },
      })
      const first = await waitFor('a modem pod', async () => (await modemPods())[0])
      await readsDisk(await waitForPod(env, `${namespace}/${first}`, 30_000), index)
      expect((await pod(first)).status?.extendedResourceClaimStatus).to.equal(undefined)

      // 1. scale to 0 and wait until the pods are gone; 2. switch, and wait for the DeviceClass (and allocatable 0); 3. scale back.
      await scale(0)
      await waitFor('no modem pod', async () => (await modemPods()).length === 0 || undefined, {timeoutMs: 30_000})
      await setAllocation('DRA')
      await switchedToDra()
      await scale(1)
      const next = await waitFor('a new modem pod', async () => (await modemPods()).find((n) => n !== first))
      const running = await waitForPod(env, `${namespace}/${next}`, 30_000)
      expect(await scheduledThroughDra(next)).to.equal(disks.deviceOf('m'))
      await readsDisk(running, index)

      // One allocator now: a second pod asking by limit finds no free device.
      await createPod('second')
      const refused = await waitFor('second unschedulable', async () => (await pod('second')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'), {
        timeoutMs: 30_000,
      })
      expect(refused.reason).to.equal('Unschedulable')
    })
  })
})
