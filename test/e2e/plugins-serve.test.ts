import {expect} from 'chai'
import {Ajv} from 'ajv'
import {execFile} from 'node:child_process'
import {lstat, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {parseAllDocuments} from 'yaml'

import {unary} from '../../src/lib/grpc-unary.js'
import {kubeletApi, type AllocateResponse} from '../../src/lib/kubelet/device-plugin-api.js'
import {listPodResources, podAllocations} from '../../src/lib/kubelet/pod-resources.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {allocatable, createPod, deletePods, podStatus, runPod, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClassManifest} from '../support/device-class.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {bindClusterRole, type PolicyRule} from '../support/rbac.js'
import {nfdctl} from '../support/run-cli.js'
import {testNode} from '../support/test-node.js'

const run = promisify(execFile)

// Loop devices 300-399 belong to these tests (harness/devices/loop-owners.ts): loopc takes 390-399, loopd the rest (a
// device of an allocation Device class in another class too would be served by neither).
const classes = `apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: loopc}
spec:
  match: [{subsystem: block, devName: "loop39[0-9]"}]
  allocation: Class
  capacity: 2
---
apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: loopd}
spec:
  match: [{subsystem: block, devName: "loop3[0-8][0-9]"}]
  allocation: Device
  permissions: r
`

interface LogLine {
  msg: string
  time: number
  class?: string
  state?: string
  chosen?: string[][]
}

describe('plugins serve on a real node (kubelet + containerd)', function () {
  let env: NodeEnv
  let dir: string
  let classFile: string
  const loops = new Set<number>()
  const pods: string[] = []
  const serving: CliProcess[] = []

  const addLoops = (...indexes: number[]): void => {
    for (const i of indexes) {
      addLoopDevice(i)
      loops.add(i)
    }
  }
  /** A loop device whose first bytes are `text`, so that a read inside a container proves access. */
  const attachBacking = async (index: number, text: string): Promise<void> => {
    const file = join(dir, `backing-${index}`)
    await writeFile(file, text.padEnd(4096, '.'))
    await run('losetup', [`/dev/loop${index}`, file])
  }
  const serve = (...args: string[]): CliProcess => {
    const metrics = args.includes('--metrics-port') ? [] : ['--metrics-port', '0']
    const cli = new CliProcess(['plugins', 'serve', '--class-file', classFile, '--node-name', env.node.name, ...metrics, '--log-format', 'json', ...args])
    serving.push(cli)
    return cli
  }
  const registered = (cli: CliProcess, name: string, after = 0): Promise<{value: LogLine; at: number}> =>
    cli.waitForLine<LogLine>(`${name} registered`, (l) => l.class === name && l.state === 'registered' && l.time > after, 15_000)
  const waitAllocatable = (resource: string, count: number): Promise<number> =>
    waitFor(`allocatable ${resource}=${count}`, async () => (await allocatable(env, resource)) === count && count, {intervalMs: 50, timeoutMs: 15_000})

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-plugins-'))
    classFile = join(dir, 'classes.yaml')
    await writeFile(classFile, classes)
  })

  afterEach(async function () {
    this.timeout(60_000)
    await deletePods(env, pods.splice(0))
    for (const cli of serving.splice(0)) await cli.stop('SIGTERM')
    for (const i of loops) {
      await run('losetup', ['-d', `/dev/loop${i}`]).catch(() => {})
      removeLoopDevice(i)
    }
    loops.clear()
  })

  after(async function () {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('registers two classes: allocatable shows them, and a pod gets its device, the variable, the annotation, and no other device', async function () {
    addLoops(300, 301, 390, 391)
    for (const i of [300, 301, 390, 391]) await attachBacking(i, `loop-${i}-data`)
    const cli = serve()
    await registered(cli, 'loopc')
    await registered(cli, 'loopd')
    expect(await waitAllocatable('devices.nfdctl.io/loopc', 2)).to.equal(2) // capacity slots
    expect(await waitAllocatable('devices.nfdctl.io/loopd', 2)).to.equal(2) // one per device

    pods.push('plugins-device')
    const pod = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '1'}, name: 'plugins-device'})
    const given = (await env.node.exec(pod.containerId, ['sh', '-c', 'echo $NFDCTL_DEVICES_LOOPD'])).trim()
    expect(given).to.be.oneOf(['/dev/loop300', '/dev/loop301'])
    const other = given === '/dev/loop300' ? 301 : 300
    expect(await env.node.exec(pod.containerId, ['dd', `if=${given}`, 'bs=13', 'count=1', 'status=none'])).to.equal(`${given.replace('/dev/', '').replace('loop', 'loop-')}-data`)
    // The class says r: the container may read but not write.
    expect(await env.node.execFailure(pod.containerId, ['sh', '-c', `echo x > ${given}`])).to.match(/Operation not permitted/)
    // The device it was not given is not there, and the devices cgroup refuses it even through mknod.
    expect(await env.node.execFailure(pod.containerId, ['ls', `/dev/loop${other}`])).to.match(/No such file/)
    await env.node.exec(pod.containerId, ['mknod', '/tmp/other', 'b', '7', String(other)])
    expect(await env.node.execFailure(pod.containerId, ['dd', 'if=/tmp/other', 'bs=13', 'count=1'])).to.match(/Operation not permitted/)
    const info = JSON.parse(await env.node.containerd.ctr('-n', 'k8s.io', 'containers', 'info', pod.containerId)) as {Spec: {annotations?: Record<string, string>}}
    const ids = info.Spec.annotations?.['classes.devices.nfdctl.io/loopd']
    expect(ids).to.match(/^loop30[01]-[0-9a-f]{12}$/)
    expect(podAllocations(await listPodResources(env.node.kubelet.podResourcesSocket), []).devicesOf({name: 'plugins-device', namespace: 'default'}, 'main', 'devices.nfdctl.io/loopd')).to.deep.equal([
      ids,
    ])

    pods.push('plugins-class')
    const classPod = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopc': '1'}, name: 'plugins-class'})
    expect((await env.node.exec(classPod.containerId, ['sh', '-c', 'echo $NFDCTL_DEVICES_LOOPC'])).trim()).to.equal('/dev/loop390,/dev/loop391')
    expect(await env.node.exec(classPod.containerId, ['dd', 'if=/dev/loop391', 'bs=13', 'count=1', 'status=none'])).to.equal('loop-391-data')
  })

  it('Device allocation follows uevents: an added loop device raises allocatable, a removed one lowers it; GetPreferredAllocation is called and honoured', async function () {
    addLoops(310)
    const cli = serve('--class', 'loopd', '--log-level', 'debug')
    await registered(cli, 'loopd')
    await waitAllocatable('devices.nfdctl.io/loopd', 1)
    addLoops(311, 312, 313)
    await waitAllocatable('devices.nfdctl.io/loopd', 4)
    removeLoopDevice(313)
    loops.delete(313)
    await waitAllocatable('devices.nfdctl.io/loopd', 3)
    const node = await env.client.request<{status: {capacity: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
    expect(node.status.capacity['devices.nfdctl.io/loopd']).to.equal('4') // the gone one stays, Unhealthy

    pods.push('plugins-preferred')
    await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '2'}, name: 'plugins-preferred'})
    const preferred = await cli.waitForLine<LogLine>('a GetPreferredAllocation call', (l) => l.msg === 'preferred allocation')
    const chosen = preferred.value.chosen![0]
    expect(chosen).to.have.length(2)
    const given = podAllocations(await listPodResources(env.node.kubelet.podResourcesSocket), []).devicesOf({name: 'plugins-preferred', namespace: 'default'}, 'main', 'devices.nfdctl.io/loopd')
    expect([...(given ?? [])].sort()).to.deep.equal([...chosen].sort())
  })

  it('kubelet restarted: re-registered within 1 s of its registration socket, the running pod keeps its device, a new pod is admitted', async function () {
    addLoops(320, 321)
    await attachBacking(320, 'loop-320-data')
    await attachBacking(321, 'loop-321-data')
    const cli = serve('--class', 'loopd')
    const first = await registered(cli, 'loopd')
    await waitAllocatable('devices.nfdctl.io/loopd', 2)
    pods.push('plugins-before-restart')
    const before = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '1'}, name: 'plugins-before-restart'})
    const device = (await env.node.exec(before.containerId, ['sh', '-c', 'echo $NFDCTL_DEVICES_LOOPD'])).trim()

    await env.node.kubelet.stop()
    const started = Date.now()
    await env.node.kubelet.start(env.client)
    const again = await registered(cli, 'loopd', first.value.time)
    // Ours is the part from kubelet's new registration socket to registered again; before it, kubelet starts
    // up (its 0.35 s of a quiet machine grows with what else runs on the node).
    const kubeletSocket = await lstat(join(env.node.pluginDir, 'kubelet.sock'))
    expect(again.value.time - kubeletSocket.ctimeMs, 'kubelet.sock created → registered again (ms)').to.be.below(1000)
    expect(again.value.time - started, 'kubelet start → registered again (ms)').to.be.below(3000)

    expect(await env.node.exec(before.containerId, ['dd', `if=${device}`, 'bs=13', 'count=1', 'status=none'])).to.match(/^loop-32[01]-data$/)
    pods.push('plugins-after-restart')
    const after = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '1'}, name: 'plugins-after-restart'})
    const other = (await env.node.exec(after.containerId, ['sh', '-c', 'echo $NFDCTL_DEVICES_LOOPD'])).trim()
    expect(other).to.be.oneOf(['/dev/loop320', '/dev/loop321']).and.not.equal(device)
  })

  it('kubelet absent at start: waits, says so once (and on /readyz), and registers when kubelet comes', async function () {
    addLoops(330)
    const port = await freePort()
    const get = async (path: string): Promise<{status: number; text: string}> => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`)
      return {status: res.status, text: await res.text()}
    }
    await env.node.kubelet.stop()
    let cli: CliProcess
    try {
      cli = serve('--class', 'loopd', '--metrics-port', String(port))
      await cli.waitForLine<LogLine>('a waiting state', (l) => l.class === 'loopd' && (l.state === 'kubelet absent' || l.state === 'register failed'))
      const waiting = await get('/readyz')
      expect(waiting.status).to.equal(503)
      expect(waiting.text).to.match(/^loopd: (kubelet absent|register failed)/)
      expect((await get('/healthz')).status).to.equal(200)
    } finally {
      await env.node.kubelet.start(env.client)
    }
    await registered(cli!, 'loopd')
    await waitAllocatable('devices.nfdctl.io/loopd', 1)
    expect(await get('/readyz')).to.deep.equal({status: 200, text: 'registered: loopd\n'})
    const metrics = (await get('/metrics')).text
    expect(metrics).to.match(/^nfdctl_plugin_registrations_total\{class="loopd"\} 1$/m)
    expect(metrics).to.match(/^nfdctl_plugin_registered\{class="loopd"\} 1$/m)
    expect(metrics).to.match(/^nfdctl_plugin_devices\{class="loopd",health="Healthy"\} 1$/m)
    expect(Number(/^nfdctl_plugin_list_and_watch_sends_total\{class="loopd"\} (\d+)$/m.exec(metrics)?.[1])).to.be.at.least(1)
    // Once per state change, not once per attempt.
    expect(cli!.json<LogLine>().filter((l) => l.class === 'loopd' && l.state !== undefined && l.state !== 'registered').length).to.be.at.most(2)
    pods.push('plugins-late-kubelet')
    await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '1'}, name: 'plugins-late-kubelet'})
  })

  it('a pod asking for more than there is is rejected by kubelet (no healthy devices left)', async function () {
    addLoops(340)
    const cli = serve('--class', 'loopd')
    await registered(cli, 'loopd')
    await waitAllocatable('devices.nfdctl.io/loopd', 1)
    pods.push('plugins-too-many')
    await createPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/loopd': '2'}, name: 'plugins-too-many'})
    const status = await waitFor(
      'the pod rejected',
      async () => {
        const s = await podStatus(env, 'plugins-too-many')
        return s.phase === 'Failed' && s
      },
      {timeoutMs: 20_000},
    )
    expect(status.reason).to.equal('UnexpectedAdmissionError')
    expect(status.message).to.include('devices.nfdctl.io/loopd')
  })

  it('replaces a stale socket file, and SIGTERM removes its sockets and exits 0', async function () {
    addLoops(350)
    const socket = join(env.node.pluginDir, 'nfdctl-loopd.sock')
    await writeFile(socket, 'stale')
    const cli = serve()
    await registered(cli, 'loopd')
    expect((await lstat(socket)).isSocket()).to.equal(true)
    expect(await cli.stop('SIGTERM')).to.equal(0)
    for (const name of ['loopc', 'loopd'])
      expect(
        await lstat(join(env.node.pluginDir, `nfdctl-${name}.sock`)).then(
          () => 'present',
          () => 'gone',
        ),
      ).to.equal('gone')
  })

  it('--cdi: Allocate names CDI devices, and the spec file validates against the CDI JSON schema', async function () {
    addLoops(360, 361)
    const cdiDir = join(dir, 'cdi')
    const cli = serve('--class', 'loopd', '--cdi', '--cdi-dir', cdiDir)
    await registered(cli, 'loopd')
    const file = join(cdiDir, 'devices.nfdctl.io-loopd.json')
    const spec = await waitFor('a CDI spec with both devices', async () => {
      const parsed = JSON.parse(await readFile(file, 'utf8')) as {kind: string; devices: Array<{name: string; containerEdits: {deviceNodes: Array<{path: string}>}}>}
      return parsed.devices.length === 2 && parsed
    })
    const schemaDir = new URL('../fixtures/cdi-schema/', import.meta.url)
    const ajv = new Ajv({allErrors: true, strict: false})
    ajv.addSchema(JSON.parse(await readFile(new URL('defs.json', schemaDir), 'utf8')) as object, 'defs.json')
    const validate = ajv.compile(JSON.parse(await readFile(new URL('schema.json', schemaDir), 'utf8')) as object)
    expect(validate(spec), JSON.stringify(validate.errors)).to.equal(true)
    expect(spec.kind).to.equal('devices.nfdctl.io/loopd')
    expect(spec.devices.map((d) => d.containerEdits.deviceNodes[0].path).sort()).to.deep.equal(['/dev/loop360', '/dev/loop361'])

    // Kubelet's side of Allocate, on the plugin's own socket: what containerd ≥ 1.7 would hand to CDI.
    const api = await kubeletApi()
    const plugin = new api.devicePluginClient(`unix:${join(env.node.pluginDir, 'nfdctl-loopd.sock')}`, api.grpc.credentials.createInsecure())
    try {
      const id = spec.devices[0].name
      const answer = await unary<object, AllocateResponse>(plugin, 'Allocate', {container_requests: [{devices_ids: [id]}]}, 5000)
      expect(answer.container_responses[0].cdi_devices).to.deep.equal([{name: `devices.nfdctl.io/loopd=${id}`}])
      expect(answer.container_responses[0].devices).to.deep.equal([
        {container_path: spec.devices[0].containerEdits.deviceNodes[0].path, host_path: spec.devices[0].containerEdits.deviceNodes[0].path, permissions: 'r'},
      ])
    } finally {
      plugin.close()
    }

    removeLoopDevice(361)
    loops.delete(361)
    await waitFor('the spec without loop361', async () => (JSON.parse(await readFile(file, 'utf8')) as {devices: unknown[]}).devices.length === 1)
  })

  it('takes its classes from the cluster, as an identity bound to exactly deploy/plugins/rbac.yaml, and serves only those for this node', async function () {
    addLoops(370)
    const rbac = parseAllDocuments(await readFile(new URL('../../deploy/plugins/rbac.yaml', import.meta.url), 'utf8')).map((d) => d.toJS() as {kind: string; rules?: PolicyRule[]})
    await bindClusterRole(env.client, 'nfdctl-plugins-test', 'nfdctl-plugins-test', rbac.find((d) => d.kind === 'ClusterRole')!.rules!)
    const kubeconfig = await env.plane.kubeconfigFor('nfdctl-plugins-test')
    const collection = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
    const deviceClass = (name: string, nodeSelector?: object): object => deviceClassManifest(name, {allocation: 'Device', match: [{devName: 'loop37[0-9]', subsystem: 'block'}], nodeSelector})
    await env.client.request('POST', collection, {body: deviceClass('loopk')})
    await env.client.request('POST', collection, {body: deviceClass('elsewhere', {matchLabels: {'nfdctl.io/test': 'no-such-node'}})})
    try {
      const cli = new CliProcess(['plugins', 'serve', '--kubeconfig', kubeconfig, '--node-name', env.node.name, '--metrics-port', '0', '--log-format', 'json'])
      serving.push(cli)
      await registered(cli, 'loopk')
      await waitAllocatable('devices.nfdctl.io/loopk', 1)
      const starting = await cli.waitForLine<LogLine & {classes: string[]}>('the start line', (l) => l.msg === 'plugins serve starting')
      expect(starting.value.classes).to.deep.equal(['loopk'])
      expect(
        await lstat(join(env.node.pluginDir, 'nfdctl-elsewhere.sock')).then(
          () => 'served',
          () => 'not served',
        ),
      ).to.equal('not served')
    } finally {
      for (const name of ['loopk', 'elsewhere']) await env.client.request('DELETE', `${collection}/${name}`).catch(() => {})
    }
  })

  it('bad input: an unknown class and a bad class file are one line and exit 2, with nothing served', async function () {
    const unknown = await nfdctl(['plugins', 'serve', '--class-file', classFile, '--class', 'nope', '--plugin-dir', join(dir, 'plugins'), '--metrics-port', '0'])
    expect(unknown.exitCode).to.equal(2)
    expect(unknown.error?.message).to.equal('unknown DeviceClass nope: the known ones are loopc, loopd (--class-file, the cluster)')
    const badFile = join(dir, 'bad.yaml')
    await writeFile(badFile, 'apiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nmetadata: {name: bad}\nspec: {match: [], permissions: rwx}\n')
    const bad = await nfdctl(['plugins', 'serve', '--class-file', badFile, '--plugin-dir', join(dir, 'plugins'), '--metrics-port', '0'])
    expect(bad.exitCode).to.equal(2)
    expect(bad.error?.message.split('\n')).to.have.length(1)
    expect(bad.error?.message).to.include(badFile)
    expect(
      await lstat(join(dir, 'plugins')).then(
        () => 'made',
        () => 'absent',
      ),
    ).to.equal('absent')
  })
})
