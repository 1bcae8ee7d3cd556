import {expect} from 'chai'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {stringify} from 'yaml'

import {stableDeviceId} from '../../src/lib/devices/device-identity.js'
import {draDeviceName} from '../../src/lib/dra/resource-slices.js'
import {claimPodManifest, claimTemplateManifest} from '../../harness/devices/dra-agent.js'
import {loopDevice} from '../../harness/devices/loop-device.js'
import {BackedLoops, canUseLoopControl, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv, type RunningPod} from '../../harness/node/pods.js'
import {
  containerIdOf,
  kubectl,
  kubeletDirPatch,
  livePods,
  loadImage,
  type NodeLayout,
  nodeLayoutPatch,
  waitForReadyPods,
  writeOverlay,
  type ListedPod,
  type NodeImage,
} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {chartDir, chartTools, deployDir, helm as runHelm, kustomize, type Tools} from '../support/chart.js'
import {clusterGates, kubeMinor} from '../support/kube-version.js'
import {nfdctlImage} from '../support/nfdctl-image.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {runEvery} from '../support/run-end.js'
import {testNode} from '../support/test-node.js'
import {rejection} from '../support/thrown.js'

// Loop devices 480-489 belong to these tests: 480-484 to the kustomize install's class, 485-489 to the chart's.
// Each test disk has a udev serial (in the agent's udev database, a directory of this suite mounted where
// the agent reads /run/udev), so that plugged in again under another loop number it is the same device.
const system = 'nfdctl-system'
const helmNamespace = 'nfdctl-helm-dra'
const consumers = 'wl-dra'
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const driver = 'devices.nfdctl.io'

interface ManagedFields {
  managedFields?: Array<{manager: string; operation: string; subresource?: string; fieldsV1?: Record<string, unknown>}>
}
interface Slice {
  metadata: ManagedFields & {name: string}
  spec: {nodeName: string; driver: string; devices?: Array<{name: string; attributes: Record<string, {string?: string; int?: number; bool?: boolean}>}>}
}
interface Claim {
  metadata: ManagedFields & {name: string; uid: string}
  status?: {
    allocation?: {devices?: {results?: Array<{device: string; pool: string; driver: string}>}}
    devices?: Array<{device: string; conditions?: Array<{type: string; status: string; reason: string}>; data?: {devNode?: string}}>
  }
}

describe('deploy/agent-dra and the chart with agent.dra.enable on the real node: the DRA driver as DaemonSet pods of the built image', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let image: NodeImage
  let loops: BackedLoops
  let tools: Tools
  const pods: string[] = []
  const overlays: string[] = []

  const serialOf = (disk: string): string => `nfdctl-dra-wl-${disk}`
  /** The DRA device name of a test disk: from its serial, whatever loop number it has. */
  const deviceOf = (disk: string): string => draDeviceName(stableDeviceId({...loopDevice(0, {ID_SERIAL: serialOf(disk), ID_SERIAL_SHORT: serialOf(disk)}), devType: 'disk'}))
  const plug = async (index: number, disk: string): Promise<void> => {
    await writeFile(join(udevDir, `b7:${index}`), `E:ID_SERIAL=${serialOf(disk)}\nE:ID_SERIAL_SHORT=${serialOf(disk)}\n`)
    await loops.add(index)
  }
  const unplug = async (index: number): Promise<void> => {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
  }

  /** The test node's paths: containerd's CDI directory (claims' devices reach containers through it), the rest below this suite's. */
  const layout = (): NodeLayout => ({
    cdiDir: env.node.containerd.cdiDir,
    containerdDir: join(env.node.containerd.options.dir, 'run'),
    dir,
    podResourcesDir: join(env.node.kubelet.rootDir, 'pod-resources'),
  })
  /** Helm (built with the control plane; its own cache and configuration) against the node's cluster. */
  const helm = async (...args: string[]): Promise<string> => {
    const result = await runHelm(tools, ['--kubeconfig', env.plane.kubeconfig, ...args])
    if (result.code !== 0) throw new Error(`helm ${args.join(' ')}: ${result.stderr.trim()}`)
    return result.stdout
  }
  const removeOverlays = async (): Promise<void> => {
    await runEvery([
      ...overlays
        .splice(0)
        .reverse()
        .map((overlay) => async () => {
          await kubectl(env, 'delete', '-k', overlay, '--ignore-not-found', '--wait=true', '--timeout=90s')
          await rm(overlay, {force: true, recursive: true})
        }),
      () => waitFor('no agent pods of deploy/agent-dra', async () => (await livePods(env, system, 'app.kubernetes.io/name=nfdctl-agent')).length === 0, {timeoutMs: 90_000}),
    ])
  }

  const slicedDevices = async (): Promise<Slice[]> =>
    (await env.client.request<{items: Slice[]}>('GET', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${env.node.name},spec.driver=${driver}`}})).items
  const waitForSliceWith = async (device: string): Promise<Slice> =>
    waitFor(`the node's ResourceSlice lists ${device}`, async () => (await slicedDevices()).find((s) => s.spec.devices?.some((d) => d.name === device)), {intervalMs: 100, timeoutMs: 30_000})

  const createTemplate = async (name: string, deviceClassName: string): Promise<void> => {
    await env.client.request('POST', `${dra}/namespaces/${consumers}/resourceclaimtemplates`, {body: claimTemplateManifest(name, deviceClassName)})
  }
  /** A pod whose container asks for the template's claim; kube-scheduler allocates it, to this node. */
  const runClaimPod = async (name: string, template: string): Promise<RunningPod> => {
    pods.push(`${consumers}/${name}`)
    await env.client.request('POST', `/api/v1/namespaces/${consumers}/pods`, {body: claimPodManifest(name, env.node.name, {template})})
    return waitForPod(env, `${consumers}/${name}`, 90_000)
  }
  const claimOf = async (pod: string): Promise<Claim> => {
    const found = await env.client.request<{status?: {resourceClaimStatuses?: Array<{resourceClaimName?: string}>}}>('GET', `/api/v1/namespaces/${consumers}/pods/${pod}`)
    const name = found.status?.resourceClaimStatuses?.[0]?.resourceClaimName
    if (name === undefined) throw new Error(`pod ${pod} has no claim`)
    return env.client.request<Claim>('GET', `${dra}/namespaces/${consumers}/resourceclaims/${name}`)
  }
  /** Waits until the claim of `pod` says `status` in the Ready condition of `device`'s entry; resolves with the entry. */
  const claimReady = async (pod: string, device: string, status: 'True' | 'False'): Promise<{reason: string; devNode?: string}> =>
    waitFor(
      `claim of ${pod}: ${device} Ready=${status}`,
      async () => {
        const entry = (await claimOf(pod)).status?.devices?.find((d) => d.device === device)
        const ready = entry?.conditions?.find((c) => c.type === 'Ready')
        return ready?.status === status ? {devNode: entry?.data?.devNode, reason: ready.reason} : undefined
      },
      {timeoutMs: 30_000},
    )
  const readsDisk = async (running: RunningPod, index: number): Promise<void> => {
    await waitFor(`${running.name} reads /dev/loop${index}`, async () => (await readLoop(env.node, running.containerId, index)) === loopData(index), {intervalMs: 20, timeoutMs: 15_000})
  }
  /**
   * The agent's log lines at warn or error (JSON lines; `--log-format=json` in the shipped DaemonSet), but for
   * the warning this release's default gates call for: the API server dropping what the driver writes.
   */
  const complaints = async (namespace: string, agent: ListedPod): Promise<string[]> => {
    const text = await kubectl(env, '-n', namespace, 'logs', agent.metadata.name, '-c', 'agent')
    const expected = [...(clusterGates.extendedResource ? [] : [/the API server drops the extendedResourceName/]), ...(clusterGates.deviceTaints ? [] : [/the API server drops .*taints/])]
    return text.split('\n').filter((line) => /"level":"(warn|error|fatal)"/.test(line) && !expected.some((warning) => warning.test(line)))
  }
  /**
   * kubectl as deploy/agent-dra's agent on `node` would be (its service account, the node its token names),
   * changing nothing (server-side dry run: authorization and admission run, nothing is stored). The
   * impersonation is the kubeconfig's (as, as-groups, as-user-extra): kubectl has --as-user-extra from 1.35 only.
   */
  const asAgentOn = async (node: string, ...args: string[]): Promise<string> => {
    const config = JSON.parse(await readFile(env.plane.kubeconfig, 'utf8')) as {users: Array<{user: Record<string, unknown>}>}
    for (const {user} of config.users) {
      Object.assign(user, {
        as: `system:serviceaccount:${system}:nfdctl-agent`,
        'as-groups': ['system:serviceaccounts', `system:serviceaccounts:${system}`, 'system:authenticated'],
        'as-user-extra': {'authentication.kubernetes.io/node-name': [node]},
      })
    }
    const kubeconfig = join(dir, `kubeconfig-agent-${node}`)
    await writeFile(kubeconfig, JSON.stringify(config), {mode: 0o600})
    return kubectl(env, '--kubeconfig', kubeconfig, ...args, '--dry-run=server')
  }
  const manager = (metadata: ManagedFields, name: string, subresource?: string): boolean =>
    (metadata.managedFields ?? []).some((f) => f.manager === name && f.operation === 'Apply' && f.subresource === subresource)

  before(async function () {
    this.timeout(15 * 60_000)
    env = await testNode(this)
    tools = await chartTools(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-dra-workloads-'))
    // The agent reads udev's database at /run/udev/data: the udev/ mount of the node layout.
    udevDir = join(dir, 'udev', 'data')
    await mkdir(udevDir, {recursive: true})
    await mkdir(join(dir, 'state'), {recursive: true})
    loops = new BackedLoops(dir)
    image = await nfdctlImage(this)
    await loadImage(env, image)
    await createNamespace(env, consumers)
  })

  afterEach(async function () {
    this.timeout(4 * 60_000)
    await runEvery([
      () => deletePods(env, pods.splice(0)),
      () => helm('uninstall', 'nfdctl', '-n', helmNamespace, '--ignore-not-found', '--wait', '--timeout', '2m'),
      removeOverlays,
      () => waitFor('no chart agent pods', async () => (await livePods(env, helmNamespace, 'app.kubernetes.io/component=agent')).length === 0, {timeoutMs: 90_000}),
      // The chart's class goes with the release; this one is the test's. Its resource.k8s.io DeviceClass is
      // owned by it and goes with it.
      () => env.client.request('DELETE', `${classesPath}/drawl`).catch(() => {}),
      ...loops.plugged.map((index) => () => unplug(index)),
    ])
  })

  after(async function () {
    this.timeout(3 * 60_000)
    if (env === undefined) return
    // Whatever a failed step above left: the cluster-scoped objects by name, so that no policy outlives the
    // suite, and the node's slices of the driver (no agent runs any more to keep them).
    await runEvery([
      () =>
        kubectl(
          env,
          'delete',
          ...['nfdctl-device-annotation-access', 'nfdctl-agent-own-node-status', 'nfdctl-agent-own-node-slices', 'nfdctl-agent-dra-device-classes', 'nfdctl-agent-own-node-claims'].flatMap((name) => [
            `validatingadmissionpolicy/${name}`,
            `validatingadmissionpolicybinding/${name}`,
          ]),
          ...['nfdctl-agent', 'nfdctl-agent-dra'].flatMap((name) => [`clusterrole/${name}`, `clusterrolebinding/${name}`]),
          'deviceclasses.resource.k8s.io/drawl.devices.nfdctl.io',
          'deviceclasses.resource.k8s.io/drawlh.devices.nfdctl.io',
          '--ignore-not-found',
        ),
      () => env.client.request('DELETE', `${classesPath}/drawlh`).catch(() => {}),
      () => env.client.request('DELETE', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${env.node.name},spec.driver=${driver}`}}),
      () => kubectl(env, 'delete', 'namespace', system, consumers, helmNamespace, '--ignore-not-found', '--wait=true', '--timeout=90s'),
      ...(loops?.plugged ?? []).map((index) => () => unplug(index)),
      async () => {
        if (dir) await rm(dir, {force: true, recursive: true})
      },
    ])
  })

  it('kubectl apply -k over deploy/agent-dra: the agent pod registers with kubelet and becomes Ready; a claim pod reads its device, which the slice lists and whose claim status the pod writes; unplugged it is gone and Not Ready, re-plugged under another loop number the same container reads it', async function () {
    this.timeout(8 * 60_000)
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'drawl'}, spec: {allocation: 'DRA', match: [{devName: 'loop48[0-4]', subsystem: 'block'}]}},
    })
    await plug(480, 'a')
    // The overlay an operator writes for this node: the image, its containerd, kubelet --root-dir, CDI and udev paths.
    const [daemonSet] = (await kustomize(tools, join(deployDir, 'agent-dra'))).filter((m) => m.kind === 'DaemonSet')
    const overlay = await writeOverlay({
      component: 'agent-dra',
      image,
      jsonPatches: [kubeletDirPatch(daemonSet, env.node.kubelet.rootDir)],
      patches: [nodeLayoutPatch('nfdctl-agent', layout())],
    })
    overlays.push(overlay)
    const applied = performance.now()
    await kubectl(env, 'apply', '-k', overlay)
    // /readyz answers 200 only once kubelet has the DRA driver registered.
    const [agent] = await waitForReadyPods(env, system, 'app.kubernetes.io/name=nfdctl-agent', 1, 180_000)
    const readyMs = performance.now() - applied

    // Everything below is written by the agent pod with its service account's token alone: the own-node slice
    // policy, the DeviceClass name policy and the resourceclaims/driver associated-node rule all apply to it.
    const slice = await waitForSliceWith(deviceOf('a'))
    expect(slice.spec.devices?.find((d) => d.name === deviceOf('a'))?.attributes[`${driver}/kernelName`]).to.deep.equal({string: 'loop480'})
    expect(manager(slice.metadata, 'nfdctl-agent'), 'the slice applied by the agent').to.equal(true)
    const deviceClass = await waitFor('the resource.k8s.io DeviceClass drawl.devices.nfdctl.io', () =>
      env.client.request<{metadata: ManagedFields}>('GET', `${dra}/deviceclasses/drawl.devices.nfdctl.io`).catch(() => undefined),
    )
    expect(manager(deviceClass.metadata, 'nfdctl-agent'), 'the DeviceClass applied by the agent').to.equal(true)

    await createTemplate('kustomize-disk', 'drawl.devices.nfdctl.io')
    const claimed = performance.now()
    const reader = await runClaimPod('kustomize-reader', 'kustomize-disk')
    await readsDisk(reader, 480)
    const claimToReadMs = performance.now() - claimed
    const claim = await claimOf('kustomize-reader')
    expect(claim.status?.allocation?.devices?.results?.map((r) => [r.driver, r.pool, r.device])).to.deep.equal([[driver, env.node.name, deviceOf('a')]])
    expect(await claimReady('kustomize-reader', deviceOf('a'), 'True')).to.deep.equal({devNode: '/dev/loop480', reason: 'DevicePresent'})
    const written = await claimOf('kustomize-reader')
    expect(manager(written.metadata, `nfdctl-dra-${env.node.name}`, 'status'), "the claim's status.devices applied by the agent").to.equal(true)

    // The rules the pod's writes passed are in force, and narrow: the same identity naming another node may
    // neither write a slice of this node nor report on this node's claim.
    const sliceFile = join(dir, 'slice.yaml')
    const sliceOf = (node: string): string =>
      stringify({
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceSlice',
        metadata: {name: `dra-wl-${node}`},
        spec: {devices: [], driver, nodeName: node, pool: {generation: 1, name: node, resourceSliceCount: 1}},
      })
    await writeFile(sliceFile, sliceOf(env.node.name))
    await asAgentOn(env.node.name, 'create', '-f', sliceFile)
    expect((await rejection(asAgentOn('other-node', 'create', '-f', sliceFile))).message).to.match(
      new RegExp(`nfdctl-agent-own-node-slices[\\s\\S]*may write only the ResourceSlices of its own node, not those of node ${env.node.name}`),
    )
    // As the agent writes a claim's status: server-side apply on the status subresource, with a condition of
    // its own (the API server authorizes a write that changes the driver's entries; one that changes nothing
    // is let through).
    const statusFile = join(dir, 'claim-status.yaml')
    await writeFile(
      statusFile,
      stringify({
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaim',
        metadata: {name: written.metadata.name, namespace: consumers},
        status: {
          devices: [
            {
              conditions: [{lastTransitionTime: new Date().toISOString().replace(/\.\d+/, ''), message: 'dry run', reason: 'Probe', status: 'True', type: 'NfdctlTestProbe'}],
              device: deviceOf('a'),
              driver,
              pool: env.node.name,
            },
          ],
        },
      }),
    )
    const applyStatus = (node: string): Promise<string> =>
      asAgentOn(node, 'apply', '--server-side', '--subresource=status', `--field-manager=nfdctl-dra-${node}`, '--force-conflicts', '-f', statusFile)
    await applyStatus(env.node.name)
    // From 1.36 the API server refuses another node's agent (resourceclaims/driver); before, the shipped policy does.
    const otherNode = kubeMinor >= 36 ? /forbidden[\s\S]*resourceclaims\/driver/i : /nfdctl-agent-own-node-claims[\s\S]*may write the status only of ResourceClaims allocated on its node/
    expect((await rejection(applyStatus('other-node'))).message).to.match(otherNode)

    await unplug(480)
    await waitFor('the read fails after the unplug', async () => (await readLoop(env.node, reader.containerId, 480)).startsWith('failed'), {intervalMs: 20, timeoutMs: 15_000})
    expect(await claimReady('kustomize-reader', deviceOf('a'), 'False')).to.include({reason: 'DeviceUnplugged'})

    const plugged = performance.now()
    await plug(481, 'a')
    await readsDisk(reader, 481)
    const replugMs = performance.now() - plugged
    expect(await claimReady('kustomize-reader', deviceOf('a'), 'True')).to.deep.equal({devNode: '/dev/loop481', reason: 'DevicePresent'})
    await waitForSliceWith(deviceOf('a'))

    const [now] = await livePods(env, system, 'app.kubernetes.io/name=nfdctl-agent')
    expect(now.metadata.uid).to.equal(agent.metadata.uid)
    expect(now.status.containerStatuses?.[0].restartCount, 'agent restarts').to.equal(0)
    expect(containerIdOf(now, 'agent')).to.be.a('string')
    expect(await complaints(system, now), 'warnings and errors in the agent pod log').to.deep.equal([])
    process.stderr.write(
      `      deploy/agent-dra: apply → agent Ready ${readyMs.toFixed(0)} ms, claim pod created → reading ${claimToReadMs.toFixed(0)} ms, re-plug → reading ${replugMs.toFixed(0)} ms\n`,
    )

    // kubectl delete -k: the pods go first (kubelet unprepares their claims with the driver still there),
    // then everything the overlay made, its agent pod too.
    await deletePods(env, pods.splice(0))
    await removeOverlays()
    const roles = await kubectl(env, 'get', 'clusterroles', '-o', 'name')
    expect(roles.split('\n')).to.not.include('clusterrole.rbac.authorization.k8s.io/nfdctl-agent-dra')
  })

  it('helm install with agent.dra.enable and the node paths: the agent pod is Ready, and a pod with a claim of the chart-made DRA class reads its device', async function () {
    this.timeout(6 * 60_000)
    const nodeLayout = layout()
    const values = {
      agent: {
        dra: {enable: true, kubeletDir: env.node.kubelet.rootDir},
        hostPaths: {
          cdiDir: env.node.containerd.cdiDir,
          containerdDir: nodeLayout.containerdDir,
          podResourcesDir: nodeLayout.podResourcesDir,
          stateDir: join(dir, 'state'),
          udevDir: join(dir, 'udev'),
        },
      },
      deviceClasses: [{name: 'drawlh', spec: {allocation: 'DRA', match: [{devName: 'loop48[5-9]', subsystem: 'block'}]}}],
      gc: {enable: false},
      image: {repository: image.name, tag: image.tag},
    }
    const valuesFile = join(dir, 'values.yaml')
    await writeFile(valuesFile, stringify(values))
    await plug(485, 'c')
    const installed = performance.now()
    await helm('install', 'nfdctl', chartDir, '-n', helmNamespace, '--create-namespace', '-f', valuesFile, '--wait', '--timeout', '3m')
    const [agent] = await waitForReadyPods(env, helmNamespace, 'app.kubernetes.io/component=agent', 1, 180_000)
    const readyMs = performance.now() - installed
    await waitForSliceWith(deviceOf('c'))
    await waitFor('the resource.k8s.io DeviceClass drawlh.devices.nfdctl.io', () => env.client.request('GET', `${dra}/deviceclasses/drawlh.devices.nfdctl.io`).catch(() => undefined))

    await createTemplate('helm-disk', 'drawlh.devices.nfdctl.io')
    const reader = await runClaimPod('helm-reader', 'helm-disk')
    await readsDisk(reader, 485)
    expect((await claimOf('helm-reader')).status?.allocation?.devices?.results?.map((r) => r.device)).to.deep.equal([deviceOf('c')])
    expect(await claimReady('helm-reader', deviceOf('c'), 'True')).to.deep.equal({devNode: '/dev/loop485', reason: 'DevicePresent'})
    expect(agent.status.containerStatuses?.[0].restartCount, 'agent restarts').to.equal(0)
    expect(await complaints(helmNamespace, agent), 'warnings and errors in the agent pod log').to.deep.equal([])
    process.stderr.write(`      helm install (agent.dra.enable): install → agent Ready ${readyMs.toFixed(0)} ms\n`)
  })
})
