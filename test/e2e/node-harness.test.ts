import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {lstat, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import type * as grpc from '@grpc/grpc-js'

import {kubeletApi, type AllocateRequest, type AllocateResponse, type ListAndWatchResponse} from '../../src/lib/kubelet/device-plugin-api.js'
import {registerWithKubelet} from '../../src/lib/kubelet/registration.js'
import {kubernetesServiceIp} from '../../harness/controlplane/control-plane.js'
import {containerdBinary} from '../../harness/controlplane/paths.js'
import {BackedLoops, loopData} from '../../harness/devices/loop-devices.js'
import {firstLoop} from '../../harness/devices/loop-owners.js'
import {kubeletPluginDir} from '../../harness/node/host-changes.js'
import {netnsPath, netnsVariable, nodeIp} from '../../harness/node/netns.js'
import {allocatable, createNamespace, createPod, deletePods, podLog, runPod, waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {stopTestNode, testNode} from '../support/test-node.js'
import {kubeVersion} from '../support/kube-version.js'

const run = promisify(execFile)

describe('the test node: a real kubelet and containerd', function () {
  let env: NodeEnv

  before(async function () {
    env = await testNode(this)
  })

  it('is Ready with its address inside the test network namespace, and runs a pod', async function () {
    const node = await env.client.request<{status: {addresses: Array<{type: string; address: string}>; nodeInfo: {kubeletVersion: string; containerRuntimeVersion: string}}}>(
      'GET',
      `/api/v1/nodes/${env.node.name}`,
    )
    expect(node.status.addresses).to.deep.include({address: nodeIp, type: 'InternalIP'})
    expect(node.status.nodeInfo.kubeletVersion).to.equal(kubeVersion)
    expect(node.status.nodeInfo.containerRuntimeVersion).to.match(/^containerd:\/\//)
    // This process, and so kubelet and containerd, run in the namespace the launcher made: only its
    // loopback, the pod bridge and the pods' veths are there, and no route leads anywhere else.
    expect((await stat('/proc/self/ns/net')).ino).to.equal((await stat(netnsPath(process.env[netnsVariable]!))).ino)
    const links = (await run('ip', ['-o', 'link', 'show'])).stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(': ')[1].split('@')[0])
    expect(links.filter((l) => l !== 'lo' && l !== 'nfdctlbr0' && !l.startsWith('veth'))).to.deep.equal([])
    expect((await run('ip', ['route', 'show', 'default'])).stdout.trim()).to.equal('')

    const pod = await runPod(env, {command: ['sh', '-c', 'echo hello from $(hostname); cat /proc/self/cgroup | grep devices; sleep 3600'], name: 'harness-hello'})
    const log = await waitFor('the pod log', async () => {
      const text = await podLog(env, pod)
      return text.includes('devices:') ? text : undefined
    })
    expect(log).to.include('hello from harness-hello')
    // Under the node's private cgroup parent, not the machine's kubepods.
    expect(log).to.match(new RegExp(`devices:/nfdctl-${env.node.name}/kubepods/`))
    await deletePods(env, ['harness-hello'])
  })

  it("is a cluster: kube-controller-manager makes a Deployment's pod, kube-scheduler places it, and the pod, with its service-account token, reaches the API server through the kubernetes Service", async function () {
    const namespace = `harness-${Date.now().toString(36)}`
    this.timeout(120_000)
    await createNamespace(env, namespace)
    // busybox's TLS cannot talk to an ECDSA-keyed API server: it checks the route and the mounted token; the
    // workload tests then use the token from nfdctl's own pods.
    const script = [
      'test -s /var/run/secrets/kubernetes.io/serviceaccount/token && test -s /var/run/secrets/kubernetes.io/serviceaccount/ca.crt && echo token mounted',
      'nc -w 2 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null && echo reached $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT',
      'sleep 3600',
    ].join('; ')
    await env.client.request('POST', `/apis/apps/v1/namespaces/${namespace}/deployments`, {
      body: {
        metadata: {name: 'whoami'},
        spec: {
          selector: {matchLabels: {app: 'whoami'}},
          template: {
            metadata: {labels: {app: 'whoami'}},
            spec: {containers: [{command: ['sh', '-c', script], image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'main'}], terminationGracePeriodSeconds: 1},
          },
        },
      },
    })
    const pod = await waitFor(
      "the Deployment's pod scheduled and running",
      async () => {
        const pods = await env.client.request<{items: Array<{metadata: {name: string}; spec: {nodeName?: string}; status: {phase?: string}}>}>('GET', `/api/v1/namespaces/${namespace}/pods`)
        return pods.items.find((p) => p.status.phase === 'Running')
      },
      {timeoutMs: 60_000},
    )
    expect(pod.spec.nodeName).to.equal(env.node.name)
    const running = await waitForPod(env, `${namespace}/${pod.metadata.name}`)
    const log = await waitFor('the review in the pod log', async () => {
      const text = await podLog(env, running)
      return text.includes('reached') ? text : undefined
    })
    expect(log).to.include('token mounted')
    expect(log).to.include(`reached ${kubernetesServiceIp}:443`)
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`)
  })

  it('runs containerd 2.4.2 from the Go module proxy with the CRI plugin, NRI off, and CDI specs read from the node directory', async function () {
    const node = await env.client.request<{status: {nodeInfo: {containerRuntimeVersion: string}}}>('GET', `/api/v1/nodes/${env.node.name}`)
    expect(node.status.nodeInfo.containerRuntimeVersion).to.equal('containerd://2.4.2')
    const plugins = (await env.node.containerd.ctr('plugins', 'ls'))
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .map((f) => ({id: `${f[0]}.${f[1]}`, status: f.at(-1)}))
    for (const id of ['io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', 'io.containerd.cri.v1.images', 'io.containerd.podsandbox.controller.v1.podsandbox']) {
      expect(plugins.find((p) => p.id === id)?.status, id).to.equal('ok')
    }
    expect(plugins.map((p) => p.id)).to.not.include('io.containerd.nri.v1.nri')
    // The configuration containerd runs with, after its own migration and defaults.
    const config = join(env.node.containerd.options.dir, 'config.toml')
    const {stdout: dump} = await run(containerdBinary(env.node.options.binDir, 'containerd'), ['--config', config, 'config', 'dump'])
    expect(dump).to.include(`cdi_spec_dirs = ['${env.node.cdiDir}']`)
    expect(env.node.cdiDir).to.equal(join(env.node.host.record.dir, 'cdi'))
  })

  it("injects a CDI device from the node's CDI directory into a pod's container through kubelet, and refuses an unknown one", async function () {
    this.timeout(120_000)
    if (!(await canUseLoops())) missingPrerequisite(this, 'loop devices (/dev/loop-control and losetup) are needed for a CDI device')
    const index = firstLoop('test/e2e/node-harness.test.ts')
    const kind = 'nfdctl-test.example/loop'
    const dir = await mkdtemp(join(tmpdir(), 'nfdctl-cdi-'))
    const loops = new BackedLoops(dir)
    // A device plugin that names devices only by CDI name: whatever reaches the container came through
    // containerd's CDI injection, not through Allocate's device list.
    const plugin = await cdiOnlyPlugin(env.node.pluginDir, kind, [`loop${index}`])
    try {
      await loops.add(index)
      await writeFile(
        join(env.node.cdiDir, 'nfdctl-test.json'),
        JSON.stringify({cdiVersion: '0.5.0', devices: [{containerEdits: {deviceNodes: [{path: `/dev/loop${index}`}]}, name: `loop${index}`}], kind}),
      )
      await waitFor(`${kind} allocatable`, async () => (await allocatable(env, kind)) === 1, {timeoutMs: 30_000})
      const pod = await runPod(env, {command: ['sh', '-c', `ls -l /dev/loop${index}; dd if=/dev/loop${index} bs=13 count=1 status=none; echo; sleep 3600`], limits: {[kind]: '1'}, name: 'harness-cdi'})
      expect(plugin.allocated).to.deep.equal([[`loop${index}`]])
      const log = await waitFor('the pod log', async () => {
        const text = await podLog(env, pod)
        return text.includes(loopData(index)) ? text : undefined
      })
      expect(log).to.match(new RegExp(`^brw-[rw-]{6} .* 7, +${index} .*/dev/loop${index}$`, 'm'))
      const info = JSON.parse(await env.node.containerd.ctr('-n', 'k8s.io', 'containers', 'info', pod.containerId)) as {Spec: {linux: {devices?: Array<Record<string, unknown>>}}}
      // Type and numbers were not in the spec: containerd's CDI resolution read them off the host's device node.
      expect(info.Spec.linux.devices?.find((d) => d.path === `/dev/loop${index}`)).to.include({major: 7, minor: index, type: 'b'})

      // A device with no spec in the directory (offered only now, so that kubelet cannot pick it for the first
      // pod): containerd refuses the container, kubelet says why.
      plugin.offer([`loop${index}`, 'unknown'])
      await waitFor(`${kind} allocatable`, async () => (await allocatable(env, kind)) === 2, {timeoutMs: 30_000})
      await createPod(env, {command: ['sleep', '3600'], limits: {[kind]: '1'}, name: 'harness-cdi-unknown'})
      const waiting = await waitFor('the unknown CDI device refused', async () => {
        const status = await env.client.request<{status?: {containerStatuses?: Array<{state?: {waiting?: {reason?: string; message?: string}}}>}}>(
          'GET',
          '/api/v1/namespaces/default/pods/harness-cdi-unknown',
        )
        const state = status.status?.containerStatuses?.[0]?.state?.waiting
        return state?.message === undefined ? undefined : state
      })
      expect(plugin.allocated).to.deep.equal([[`loop${index}`], ['unknown']])
      expect(waiting.reason).to.equal('CreateContainerError')
      expect(waiting.message).to.include(`unresolvable CDI devices ${kind}=unknown`)
    } finally {
      await deletePods(env, ['harness-cdi', 'harness-cdi-unknown'])
      await plugin.close()
      await rm(join(env.node.cdiDir, 'nfdctl-test.json'), {force: true})
      for (const i of loops.plugged) await loops.drop(i)
      await rm(dir, {force: true, recursive: true})
    }
  })

  it('stops without leaving anything on the host', async function () {
    const cgroupsBefore = env.node.host.record.cgroups
    const sysctls = env.node.host.record.sysctls
    await stopTestNode() // throws when something is left
    for (const cgroup of cgroupsBefore) await expectGone(cgroup)
    await expectGone(env.node.host.record.dir)
    const pluginDir = await lstat(kubeletPluginDir).catch(() => undefined)
    if (pluginDir?.isSymbolicLink()) expect(await readlink(kubeletPluginDir)).to.not.include(env.node.host.record.dir)
    for (const [name, value] of Object.entries(sysctls)) expect((await readFile(`/proc/sys/${name.replaceAll('.', '/')}`, 'utf8')).trim(), name).to.equal(value)
    const mounts = await readFile('/proc/self/mounts', 'utf8')
    expect(mounts).to.not.include(env.node.host.record.dir)
    expect(await processesOf(env.node.kubelet.options.binary)).to.equal(0)
  })
})

async function expectGone(...paths: string[]): Promise<void> {
  for (const path of paths) {
    const found = await stat(path).then(
      () => true,
      () => false,
    )
    expect(found, `${path} should be gone`).to.equal(false)
  }
}

async function canUseLoops(): Promise<boolean> {
  return (
    (await stat('/dev/loop-control').catch(() => undefined)) !== undefined
    && (await run('losetup', ['--version']).then(
      () => true,
      () => false,
    ))
  )
}

interface CdiOnlyPlugin {
  /** The device IDs of each Allocate request's containers, in order. */
  readonly allocated: string[][]
  /** Sends kubelet a new device list. */
  offer(ids: readonly string[]): void
  close(): Promise<void>
}

/**
 * A kubelet device plugin for `resource` whose Allocate answers name each device only as the CDI device
 * `<resource>=<id>`: no device nodes, mounts or environment of its own.
 */
async function cdiOnlyPlugin(pluginDir: string, resource: string, ids: readonly string[]): Promise<CdiOnlyPlugin> {
  const api = await kubeletApi()
  const endpoint = 'nfdctl-cdi-test.sock'
  const socket = join(pluginDir, endpoint)
  const allocated: string[][] = []
  let offered = ids
  const list = (): ListAndWatchResponse => ({devices: offered.map((ID) => ({ID, health: 'Healthy'}))})
  const streams: Array<grpc.ServerWritableStream<unknown, ListAndWatchResponse>> = []
  const server = new api.grpc.Server()
  server.addService(api.devicePlugin, {
    Allocate: (call: grpc.ServerUnaryCall<AllocateRequest, AllocateResponse>, callback: grpc.sendUnaryData<AllocateResponse>) => {
      for (const r of call.request.container_requests) allocated.push(r.devices_ids)
      callback(null, {
        container_responses: call.request.container_requests.map((r) => ({annotations: {}, cdi_devices: r.devices_ids.map((id) => ({name: `${resource}=${id}`})), devices: [], envs: {}, mounts: []})),
      })
    },
    GetDevicePluginOptions: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, {get_preferred_allocation_available: false, pre_start_required: false}),
    ListAndWatch: (stream: grpc.ServerWritableStream<unknown, ListAndWatchResponse>) => {
      streams.push(stream)
      stream.write(list())
    },
  })
  await rm(socket, {force: true})
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socket}`, api.grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())))
  await registerWithKubelet(pluginDir, endpoint, resource, {get_preferred_allocation_available: false, pre_start_required: false}, 5000)
  return {
    allocated,
    offer: (next) => {
      offered = next
      for (const stream of streams) stream.write(list())
    },
    close: async () => {
      for (const stream of streams) stream.end()
      server.forceShutdown()
      await rm(socket, {force: true})
    },
  }
}

async function processesOf(binary: string): Promise<number> {
  let count = 0
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    if ((await readlink(`/proc/${pid}/exe`).catch(() => '')) === binary) count++
  }
  return count
}
