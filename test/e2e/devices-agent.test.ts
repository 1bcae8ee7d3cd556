import {expect} from 'chai'
import {lstat, mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {isDeepStrictEqual} from 'node:util'

import {parseAllDocuments, parseDocument} from 'yaml'

import {ContainerdClient, type RuntimeContainer} from '../../src/lib/runtime/containerd-client.js'
import {agentProgramName, devicePrograms} from '../../src/lib/runtime/device-bpf.js'
import {deviceControlOf, formatRule, readDeviceRules, type DeviceControl} from '../../src/lib/runtime/device-cgroup.js'
import {emulateRules} from '../../src/lib/runtime/device-program.js'
import {attachProgram, attachRuntimeProgram, runcDeviceRules} from '../../harness/devices/device-programs.js'
import {nodeAgentArgs} from '../../harness/devices/dra-agent.js'
import {BackedLoops, canUseLoopControl, readLoop} from '../../harness/devices/loop-devices.js'
import {allocatable, createNamespace, deletePods, runPod, waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {deviceClassManifest} from '../support/device-class.js'
import {DroppingProxy} from '../support/dropping-proxy.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {bindClusterRole, type PolicyRule} from '../support/rbac.js'
import {testNode} from '../support/test-node.js'

// Loop devices 980-999 belong to these tests (hotc takes 990-999, hotl 989, the access-policy test 986-988, the
// identity test 980-982, Device allocation 983-984, owned numbers 985), and 810 (the runtime's own devices). A Device class here must match no loop of hotc: a device in two such classes is served by neither.
// hotc admits the annotation from every namespace; the access-policy test has classes of its own.
const classes = `apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: hotc}
spec:
  match: [{subsystem: block, devName: "loop99[0-9]"}]
  allocation: Class
  capacity: 3
  annotationAccess: {namespaceSelector: {}}
`

interface LogLine {
  msg: string
  class?: string
  state?: string
  granted?: string[]
  revoked?: string[]
  pod?: string
}

describe('devices agent on a real node: devices follow containers', function () {
  let env: NodeEnv
  let dir: string
  let agent: CliProcess | undefined
  let agentKubeconfig: string
  let loops: BackedLoops
  const pods: string[] = []

  const expectNoDevice = async (containerId: string, index: number): Promise<void> => {
    expect(await env.node.execFailure(containerId, ['ls', `/dev/loop${index}`])).to.match(/No such file/)
  }

  // Every agent here runs as an identity bound to exactly deploy/agent/rbac.yaml, with its own state dir.
  const startAgent = async (options: {metricsPort?: number; kubeconfig?: string; stateDir?: string; extraArgs?: string[]} = {}): Promise<CliProcess> => {
    const cli = new CliProcess(
      nodeAgentArgs(env.node, {kubeconfig: options.kubeconfig ?? agentKubeconfig, stateDir: options.stateDir ?? join(dir, 'state')}, [
        '--metrics-port',
        String(options.metricsPort ?? 0),
        '--batch-quiet',
        '100ms',
        ...(options.extraArgs ?? []),
      ]),
    )
    await cli.waitForLine<LogLine>('hotc registered', (l) => l.class === 'hotc' && l.state === 'registered', 20_000)
    return cli
  }
  /** The container's device control of the given cgroup version (found from its task's PID), and its OCI spec. */
  const cgroupOf = async (containerId: string, mode: 'v1' | 'v2'): Promise<{control: DeviceControl; spec: NonNullable<RuntimeContainer['spec']>}> => {
    const containerd = new ContainerdClient({address: env.node.containerd.socket, namespace: 'k8s.io'})
    try {
      const pid = (await containerd.getTask(containerId))!.pid
      return {control: await deviceControlOf(pid, {mode}), spec: (await containerd.getContainer(containerId))!.spec!}
    } finally {
      containerd.close()
    }
  }
  /** The rules of the container's v1 devices cgroup naming loop<index> (what the kernel enforces there). */
  const loopRules = async (containerId: string, index: number): Promise<string[]> => {
    const {control} = await cgroupOf(containerId, 'v1')
    return (await readDeviceRules(control.dir)).filter((r) => r.type === 'b' && r.major === 7 && r.minor === index).map(formatRule)
  }
  const createClass = async (): Promise<void> => {
    await env.client.request('POST', classesPath, {body: parseDocument(classes).toJS() as object}).catch(() => {})
  }

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-agent-'))
    loops = new BackedLoops(dir)
    const rbac = parseAllDocuments(await readFile(new URL('../../deploy/agent/rbac.yaml', import.meta.url), 'utf8')).map((d) => d.toJS() as {kind: string; rules?: PolicyRule[]})
    await bindClusterRole(env.client, 'nfdctl-agent-test', 'nfdctl-agent-test', rbac.find((d) => d.kind === 'ClusterRole')!.rules!)
    agentKubeconfig = await env.plane.kubeconfigFor('nfdctl-agent-test')
  })

  const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
  interface NodeEntry {
    node: string
    devices?: Array<{id: string; devName: string}>
    holders?: number
    observedGeneration?: number
  }
  interface Condition {
    type: string
    status: string
    reason: string
    message: string
    observedGeneration?: number
  }
  const classStatus = async (name: string): Promise<{nodes?: NodeEntry[]; conditions?: Condition[]}> =>
    (await env.client.request<{status?: {nodes?: NodeEntry[]; conditions?: Condition[]}}>('GET', `${classesPath}/${name}`)).status ?? {}
  const nodeEntry = async (name: string): Promise<NodeEntry | undefined> => (await classStatus(name)).nodes?.find((n) => n.node === env.node.name)
  const validCondition = async (name: string): Promise<Condition | undefined> => (await classStatus(name)).conditions?.find((c) => c.type === 'Valid')

  afterEach(async function () {
    this.timeout(60_000)
    if (process.env.NFDCTL_DEBUG_AGENT && this.currentTest?.state === 'failed' && agent) console.log(agent.transcript())
    await agent?.stop('SIGTERM')
    agent = undefined
    await deletePods(env, pods.splice(0))
    for (const i of loops.plugged) await loops.drop(i)
  })

  after(async function () {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  // auto: the v1 devices cgroup (this host); v2: on this hybrid host the containers' unified cgroups have no
  // device program (runc restricts devices through v1), so the agent attaches none and changes the v1 rules.
  for (const mode of ['auto', 'v2'] as const) {
    it(`--cgroup-mode ${mode}: hot-plugs a device into running containers (by limit and by annotation), takes it away on unplug, writes the node's status entry, gives nothing to a container that did not ask, and leaves access in place on SIGTERM`, async function () {
      await loops.add(990)
      // The class lives in the cluster, so that the agent writes the node's entry of its status.
      await createClass()
      const metricsPort = await freePort()
      // A state dir per mode: the force-deleted pods of the run before may still have running containers, whose
      // recorded grants an agent sharing the record would rightly take back (and count).
      agent = await startAgent({extraArgs: ['--cgroup-mode', mode], metricsPort, stateDir: join(dir, `state-${mode}`)})
      /** On v2: the programs of the container's unified cgroup (none to read, so none built from a model of the runtime). */
      const programNames = async (containerId: string): Promise<string[]> => devicePrograms((await cgroupOf(containerId, 'v2')).control.dir).map((p) => p.name)
      await waitFor('allocatable hotc=3', async () => (await allocatable(env, 'devices.nfdctl.io/hotc')) === 3, {timeoutMs: 15_000})

      pods.push(`agent-limit-${mode}`, `agent-annotation-${mode}`)
      const byLimit = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/hotc': '1'}, name: `agent-limit-${mode}`})
      const byAnnotation = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: `agent-annotation-${mode}`, sidecar: true})
      expect(await readLoop(env.node, byLimit.containerId, 990)).to.equal('loop-990-data') // from kubelet's Allocate
      // The annotated pod has no allocation: the agent gives it the device after it starts.
      await waitFor('the annotated pod reads loop990', async () => (await readLoop(env.node, byAnnotation.containerId, 990)) === 'loop-990-data', {timeoutMs: 10_000})

      // Plugged in after both started: both can read it within 1 s (each timed on its own, exec included).
      const grantsBefore = await metric(metricsPort, 'nfdctl_agent_rule_changes_total{action="grant"}')
      const plugged = performance.now()
      await loops.add(991)
      const readableAfterMs = await Promise.all(
        [byLimit, byAnnotation].map(async (pod) => {
          await waitFor(`${pod.name} reads the new loop991`, async () => (await readLoop(env.node, pod.containerId, 991)) === 'loop-991-data', {intervalMs: 10, timeoutMs: 10_000})
          return performance.now() - plugged
        }),
      )
      for (const ms of readableAfterMs) expect(ms, 'plugged → readable inside the container (ms)').to.be.below(1000)
      // The container of the same pod that did not ask has neither device.
      for (const index of [990, 991]) {
        await expectNoDevice(byAnnotation.containerIds.sidecar, index)
      }
      const entry = await waitFor(
        "the node's status entry with both devices and both containers",
        async () => {
          const e = await nodeEntry('hotc')
          return e?.devices?.length === 2 && e.holders === 2 && e
        },
        {timeoutMs: 10_000},
      )
      expect(entry.devices?.map((d) => d.devName)).to.deep.equal(['loop990', 'loop991'])
      // A count: whoever may read classes does not learn which tenants' pods hold them.
      expect(JSON.stringify(await classStatus('hotc'))).to.not.match(/agent-(annotation|limit)-/)
      if (mode === 'v2') for (const pod of [byLimit, byAnnotation]) expect(await programNames(pod.containerId), `${pod.name}'s programs`).to.deep.equal([])
      expect(entry.observedGeneration).to.equal(1)
      // The metrics say the same: two devices, two containers holding the class, two grants for loop991.
      expect(await metric(metricsPort, 'nfdctl_agent_class_devices{class="hotc"}')).to.equal(2)
      expect(await metric(metricsPort, 'nfdctl_agent_class_containers{class="hotc"}')).to.equal(2)
      expect((await metric(metricsPort, 'nfdctl_agent_rule_changes_total{action="grant"}')) - grantsBefore).to.equal(2)
      expect(await metric(metricsPort, 'nfdctl_agent_batch_events_count')).to.be.greaterThan(0)
      expect(await metric(metricsPort, 'nfdctl_agent_batch_duration_seconds_count')).to.be.greaterThan(0)
      expect((await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status).to.equal(200)

      // Unplugged: the rule and the node go from both. (Looked at with ls, not opened: opening a loop node that
      // no longer has a device makes the kernel create the device again.)
      await loops.drop(991)
      for (const pod of [byLimit, byAnnotation]) {
        await waitFor(`loop991 gone from ${pod.name}`, async () => /No such file/.test(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop991']).catch(() => '')), {timeoutMs: 10_000})
      }
      expect(agent.json<LogLine>().some((l) => l.msg === 'devices updated' && l.revoked?.includes('/dev/loop991'))).to.equal(true)
      // Denied, not only hidden: the devices cgroup no longer allows it (a mknod'ed node would not open).
      for (const pod of [byLimit, byAnnotation]) expect(await loopRules(pod.containerId, 991), `${pod.name}'s rules for loop991`).to.deep.equal([])
      expect(await loopRules(byAnnotation.containerId, 990)).to.deep.equal(['b 7:990 rw'])
      if (mode === 'v2') for (const pod of [byLimit, byAnnotation]) expect(await programNames(pod.containerId), `${pod.name}'s programs`).to.deep.equal([])
      await waitFor('the status entry without loop991', async () => (await nodeEntry('hotc'))?.devices?.map((d) => d.devName).join() === 'loop990', {timeoutMs: 10_000})
      expect(await metric(metricsPort, 'nfdctl_agent_class_devices{class="hotc"}')).to.equal(1)
      expect(await metric(metricsPort, 'nfdctl_agent_rule_changes_total{action="revoke"}')).to.equal(2)

      // SIGTERM: the agent stops, exit 0, and the containers keep what they were given.
      expect(await agent.stop('SIGTERM')).to.equal(0)
      agent = undefined
      expect(await readLoop(env.node, byLimit.containerId, 990)).to.equal('loop-990-data')
      expect(await readLoop(env.node, byAnnotation.containerId, 990)).to.equal('loop-990-data')
      await env.client.request('DELETE', `${classesPath}/hotc`)
    })
  }

  it('access policy: an annotation is refused where the class does not admit it (Event, log, metric), granted and hot-plugged where it does, within capacity, and revoked when the namespace stops being admitted', async function () {
    const suffix = Date.now().toString(36)
    const admitted = `pol-admitted-${suffix}`
    const other = `pol-other-${suffix}`
    for (const [name, labels] of [
      [admitted, {'nfdctl-test/devices': 'allowed'}],
      [other, {}],
    ] as const) {
      await createNamespace(env, name, labels)
    }
    const policyClasses = [
      deviceClassManifest('polc', {annotationAccess: {namespaceSelector: {matchLabels: {'nfdctl-test/devices': 'allowed'}}}, capacity: 1, match: [{devName: 'loop98[67]', subsystem: 'block'}]}),
      deviceClassManifest('pold', {match: [{devName: 'loop988', subsystem: 'block'}]}), // no annotationAccess: the default
    ]
    for (const body of policyClasses) await env.client.request('POST', classesPath, {body})
    /** The agent's Events on a pod. */
    const events = async (pod: {namespace: string; uid: string}): Promise<Array<{reason: string; message: string; type: string}>> =>
      (
        await env.client.request<{items: Array<{reason: string; message: string; type: string}>}>('GET', `/api/v1/namespaces/${pod.namespace}/events`, {
          query: {fieldSelector: `involvedObject.uid=${pod.uid}`},
        })
      ).items.filter((e) => e.reason.startsWith('DeviceAccess')) // kubelet's own Events are there too
    try {
      await loops.add(986)
      await loops.add(988)
      await createClass() // startAgent waits for hotc's plugin
      const metricsPort = await freePort()
      agent = await startAgent({metricsPort})
      await agent.waitForLine<LogLine>('polc registered', (l) => l.class === 'polc' && l.state === 'registered', 20_000)

      // Not admitted: the namespace is not selected (polc), the class has no annotationAccess (pold).
      pods.push(`${other}/outsider`, `${admitted}/holder`, `${admitted}/second`)
      const outsider = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'polc,pold'}, command: ['sleep', '3600'], name: 'outsider', namespace: other})
      const refusals = await waitFor(
        'two DeviceAccessRefused Events on the outsider',
        async () => {
          const list = await events(outsider)
          return list.length >= 2 && list
        },
        {timeoutMs: 10_000},
      )
      expect(refusals.map((e) => `${e.type} ${e.reason}`)).to.deep.equal(['Warning DeviceAccessRefused', 'Warning DeviceAccessRefused'])
      expect(refusals.map((e) => e.message).sort()).to.satisfy(
        (m: string[]) =>
          /container main: DeviceClass \(devices\.nfdctl\.io\) pold does not admit the annotation/.test(m.join('\n'))
          && new RegExp(`container main: namespace ${other} is not selected by spec\\.annotationAccess\\.namespaceSelector of DeviceClass \\(devices\\.nfdctl\\.io\\) polc`).test(m.join('\n')),
      )
      await expectNoDevice(outsider.containerId, 986)
      await expectNoDevice(outsider.containerId, 988)
      expect(await loopRules(outsider.containerId, 986)).to.deep.equal([])
      expect(await metric(metricsPort, 'nfdctl_agent_requests_refused_total{class="polc",reason="namespace-not-admitted"}')).to.equal(1)
      expect(await metric(metricsPort, 'nfdctl_agent_requests_refused_total{class="pold",reason="annotation-access-off"}')).to.equal(1)
      expect(
        agent
          .json<LogLine & {reason?: string}>()
          .filter((l) => l.msg.startsWith('device access refused') && l.pod === 'outsider')
          .map((l) => `${l.class} ${l.reason}`)
          .sort(),
      ).to.deep.equal(['polc namespace-not-admitted', 'pold annotation-access-off'])

      // Admitted: the device now, and one plugged in later.
      const holder = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'polc'}, command: ['sleep', '3600'], name: 'holder', namespace: admitted})
      await waitFor('the admitted pod reads loop986', async () => (await readLoop(env.node, holder.containerId, 986)) === 'loop-986-data', {timeoutMs: 10_000})
      await loops.add(987)
      await waitFor('the admitted pod reads the hot-plugged loop987', async () => (await readLoop(env.node, holder.containerId, 987)) === 'loop-987-data', {timeoutMs: 10_000})

      // Capacity 1, held: a second admitted pod is refused, and the holder keeps its devices.
      const second = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'polc'}, command: ['sleep', '3600'], name: 'second', namespace: admitted})
      const full = await waitFor('a capacity Event on the second pod', async () => (await events(second)).find((e) => e.reason === 'DeviceAccessRefused'), {timeoutMs: 10_000})
      expect(full.message).to.match(/polc is held by 1 container\(s\) on node .*its capacity/)
      await expectNoDevice(second.containerId, 986)
      expect(await readLoop(env.node, holder.containerId, 986)).to.equal('loop-986-data')
      // The refusals were told once each, however many batches ran since.
      expect((await events(outsider)).length).to.equal(2)

      // The namespace loses its label: the holder's devices go within a batch, with an Event saying why.
      await env.client.request('PATCH', `/api/v1/namespaces/${admitted}`, {body: {metadata: {labels: {'nfdctl-test/devices': null}}}, contentType: 'application/merge-patch+json'})
      for (const index of [986, 987]) {
        await waitFor(`loop${index} gone from the holder`, async () => /No such file/.test(await env.node.execFailure(holder.containerId, ['ls', `/dev/loop${index}`]).catch(() => '')), {
          timeoutMs: 10_000,
        })
        expect(await loopRules(holder.containerId, index)).to.deep.equal([])
      }
      const revoked = await waitFor('a DeviceAccessRevoked Event on the holder', async () => (await events(holder)).find((e) => e.reason === 'DeviceAccessRevoked'), {timeoutMs: 10_000})
      expect(revoked.message).to.include(`namespace ${admitted} is not selected`)
      await expectNoDevice(second.containerId, 986)
    } finally {
      for (const name of ['polc', 'pold']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    }
  })

  it('access policy: a grant the agent has no record of (a lost grant record, or one made before the policy) is taken back once the class no longer admits the container', async function () {
    const revocable = deviceClassManifest('polr', {annotationAccess: {namespaceSelector: {}}, match: [{devName: 'loop986', subsystem: 'block'}]})
    await env.client.request('POST', classesPath, {body: revocable})
    const stateDir = join(dir, 'state-unrecorded')
    try {
      await loops.add(986)
      await createClass() // startAgent waits for hotc's plugin
      agent = await startAgent({stateDir})
      pods.push('unrecorded')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'polr'}, command: ['sleep', '3600'], name: 'unrecorded'})
      await waitFor('the pod reads loop986', async () => (await readLoop(env.node, pod.containerId, 986)) === 'loop-986-data', {timeoutMs: 10_000})
      expect(await agent.stop('SIGTERM')).to.equal(0)
      agent = undefined
      await rm(join(stateDir, 'grants.json'))
      await env.client.request('PATCH', `${classesPath}/polr`, {body: {spec: {annotationAccess: null}}, contentType: 'application/merge-patch+json'})
      agent = await startAgent({stateDir})
      await waitFor('loop986 gone from the pod', async () => /No such file/.test(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop986']).catch(() => '')), {timeoutMs: 10_000})
      expect(await loopRules(pod.containerId, 986)).to.deep.equal([])
    } finally {
      await env.client.request('DELETE', `${classesPath}/polr`).catch(() => {})
    }
  })

  it('keeps containers right across restarts: the agent (nothing applied twice), containerd (a device plugged meanwhile arrives), kubelet (plugins register again), a crashed container', async function () {
    await loops.add(992)
    await createClass()
    try {
      agent = await startAgent()
      pods.push('agent-restarts')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-restarts'})
      await waitFor('the pod reads loop992', async () => (await readLoop(env.node, pod.containerId, 992)) === 'loop-992-data', {timeoutMs: 10_000})

      // The agent restarted: the container keeps its access and the new agent changes nothing.
      expect(await agent.stop('SIGTERM')).to.equal(0)
      agent = await startAgent()
      await sleep(1500) // a start batch (quiet 100 ms) has run by now; what is asserted is that it did nothing
      expect(agent.json<LogLine>().filter((l) => l.msg === 'devices updated')).to.deep.equal([])
      expect(await readLoop(env.node, pod.containerId, 992)).to.equal('loop-992-data')

      // containerd restarted, and a device plugged while it was away: the agent re-lists when it is back.
      await env.node.containerd.restart(() => loops.add(993))
      await waitFor('the pod reads loop993 after containerd is back', async () => (await readLoop(env.node, pod.containerId, 993)) === 'loop-993-data', {intervalMs: 50, timeoutMs: 15_000})
      expect(await readLoop(env.node, pod.containerId, 992)).to.equal('loop-992-data')

      // kubelet restarted: the embedded plugins register again and the pod keeps its devices.
      const registrations = (): number => agent!.json<LogLine>().filter((l) => l.class === 'hotc' && l.state === 'registered').length
      const before = registrations()
      await env.node.kubelet.stop()
      await env.node.kubelet.start(env.client)
      await agent.waitFor('hotc registered again', () => (registrations() > before ? true : undefined), {timeoutMs: 10_000})
      expect(await readLoop(env.node, pod.containerId, 993)).to.equal('loop-993-data')

      // The container crashes and kubelet starts a new one: it gets both devices again.
      await env.node.containerd.ctr('-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', pod.containerId)
      const restarted = await waitFor(
        'a new container for the pod',
        async () => {
          const now = await waitForPod(env, 'agent-restarts', 500).catch(() => undefined)
          return now !== undefined && now.containerId !== pod.containerId && now
        },
        {timeoutMs: 30_000},
      )
      for (const index of [992, 993]) {
        await waitFor(`the new container reads loop${index}`, async () => (await readLoop(env.node, restarted.containerId, index)) === `loop-${index}-data`, {timeoutMs: 10_000})
      }
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it('takes back what it gave when a container stops asking (its annotation edited away), also while the agent was away', async function () {
    await loops.add(999)
    await createClass()
    try {
      agent = await startAgent()
      pods.push('agent-stops-asking', 'agent-stops-later')
      const first = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-stops-asking'})
      const second = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-stops-later'})
      for (const pod of [first, second]) await waitFor(`${pod.name} reads loop999`, async () => (await readLoop(env.node, pod.containerId, 999)) === 'loop-999-data', {timeoutMs: 10_000})
      const stopAsking = (name: string): Promise<unknown> =>
        env.client.request('PATCH', `/api/v1/namespaces/default/pods/${name}`, {body: {metadata: {annotations: {'devices.nfdctl.io/main': null}}}, contentType: 'application/merge-patch+json'})

      await stopAsking(first.name)
      await waitFor('loop999 taken from the first pod', async () => (await loopRules(first.containerId, 999)).length === 0, {timeoutMs: 10_000})
      await expectNoDevice(first.containerId, 999)
      expect(await readLoop(env.node, second.containerId, 999)).to.equal('loop-999-data')
      await waitFor('the status entry counts only the second pod', async () => (await nodeEntry('hotc'))?.holders === 1, {timeoutMs: 10_000})

      // Edited while no agent runs: the next agent's first batch looks at every container.
      expect(await agent.stop('SIGTERM')).to.equal(0)
      await stopAsking(second.name)
      agent = await startAgent()
      await waitFor('loop999 taken from the second pod by the restarted agent', async () => (await loopRules(second.containerId, 999)).length === 0, {timeoutMs: 10_000})
      await expectNoDevice(second.containerId, 999)
      const updates = agent.json<LogLine>().filter((l) => l.msg === 'devices updated')
      expect(updates.map((l) => [l.pod, l.granted, l.revoked])).to.deep.equal([['default/agent-stops-later', [], ['/dev/loop999']]])
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it('rides out a storm of 10,000 synthetic uevents: /healthz answers throughout, batches coalesce, and the final state is right', async function () {
    await loops.add(994)
    await createClass()
    const port = await freePort()
    try {
      agent = await startAgent({metricsPort: port})
      pods.push('agent-storm')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-storm'})
      await waitFor('the pod reads loop994', async () => (await readLoop(env.node, pod.containerId, 994)) === 'loop-994-data', {timeoutMs: 10_000})
      const batchesBefore = await metric(port, 'nfdctl_agent_batch_events_count')

      let probing = true
      const slowest: number[] = []
      const probes = (async () => {
        while (probing) {
          const started = performance.now()
          const res = await fetch(`http://127.0.0.1:${port}/healthz`)
          expect(res.status).to.equal(200)
          slowest.push(performance.now() - started)
          await sleep(50)
        }
      })()
      // `change` written to the device's uevent file: the kernel sends a real uevent for each.
      const uevent = '/sys/devices/virtual/block/loop994/uevent'
      for (let i = 0; i < 10_000; i++) {
        await writeFile(uevent, 'change')
        if (i === 5000) await loops.add(995) // a real plug-in in the middle of the storm
      }
      await waitFor('the pod reads loop995', async () => (await readLoop(env.node, pod.containerId, 995)) === 'loop-995-data', {timeoutMs: 60_000})
      probing = false
      await probes
      expect(await readLoop(env.node, pod.containerId, 994)).to.equal('loop-994-data')
      expect(Math.max(...slowest), '/healthz slowest answer during the storm (ms)').to.be.below(1000)
      const batches = (await metric(port, 'nfdctl_agent_batch_events_count')) - batchesBefore
      expect(batches, 'batches for 10,000 events').to.be.below(200)
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it('Device allocation by limit: a container gets only the device kubelet allocated (PodResources), and gets it back after an unplug and replug', async function () {
    const deviceClass = deviceClassManifest('hotd', {allocation: 'Device', match: [{devName: 'loop98[34]', subsystem: 'block'}]})
    await env.client.request('POST', classesPath, {body: deviceClass}).catch(() => {})
    await createClass()
    await loops.add(983)
    await loops.add(984)
    try {
      agent = await startAgent()
      await agent.waitForLine<LogLine>('hotd registered', (l) => l.class === 'hotd' && l.state === 'registered', 20_000)
      await waitFor('allocatable hotd=2', async () => (await allocatable(env, 'devices.nfdctl.io/hotd')) === 2, {timeoutMs: 15_000})
      pods.push('agent-device')
      const pod = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/hotd': '1'}, name: 'agent-device'})
      const mine = Number((await env.node.exec(pod.containerId, ['sh', '-c', 'echo $NFDCTL_DEVICES_HOTD'])).trim().replace('/dev/loop', ''))
      const other = mine === 983 ? 984 : 983
      expect(await readLoop(env.node, pod.containerId, mine)).to.equal(`loop-${mine}-data`)
      await expectNoDevice(pod.containerId, other)

      // Unplugged and plugged again: the same stable ID, so the agent gives it back (kubelet does not call Allocate again).
      await loops.drop(mine)
      await waitFor(
        'the allocated device gone from the container',
        async () =>
          env.node.execFailure(pod.containerId, ['ls', `/dev/loop${mine}`]).then(
            () => true,
            () => false,
          ),
        {timeoutMs: 10_000},
      )
      await loops.add(mine)
      await waitFor('the allocated device back in the container', async () => (await readLoop(env.node, pod.containerId, mine)) === `loop-${mine}-data`, {timeoutMs: 10_000})
      await sleep(500) // a batch has run since: the device it was not allocated is still not given
      await expectNoDevice(pod.containerId, other)
    } finally {
      for (const name of ['hotd', 'hotc']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    }
  })

  it('identity and exclusivity: identical serial-less disks at one port are served to nobody until a port tells them apart; a device a Device class shares with an annotation class reaches no container', async function () {
    const udevDir = join(dir, 'udev-identity')
    await mkdir(udevDir, {recursive: true})
    // udev's record of a device without a serial number: ID_SERIAL is only <vendor>_<model>, no ID_SERIAL_SHORT.
    const record = (index: number, port: string): Promise<void> => writeFile(join(udevDir, `b7:${index}`), `E:ID_SERIAL=Lab_Disk\nE:ID_PATH=${port}\n`)
    const classEvents = async (name: string): Promise<Array<{reason: string; message: string}>> =>
      (await env.client.request<{items: Array<{reason: string; message: string; involvedObject: {kind: string; name: string}}>}>('GET', '/api/v1/namespaces/default/events')).items.filter(
        (e) => e.involvedObject.kind === 'DeviceClass' && e.involvedObject.name === name,
      )
    await env.client.request('POST', classesPath, {body: deviceClassManifest('hotu', {allocation: 'Device', match: [{devName: 'loop98[0-2]', subsystem: 'block'}]})})
    await createClass()
    await record(980, 'platform-hub-1')
    await record(981, 'platform-hub-1')
    await loops.add(980)
    await loops.add(981)
    try {
      agent = await startAgent({extraArgs: ['--udev-data-dir', udevDir]})
      await agent.waitForLine<LogLine>('hotu registered', (l) => l.class === 'hotu' && l.state === 'registered', 20_000)
      const refused = await waitFor('both disks refused in the status', async () => {
        const entry = (await nodeEntry('hotu')) as (NodeEntry & {refused?: Array<{id: string; reason: string; message: string}>}) | undefined
        return entry?.refused?.length === 2 ? entry.refused : undefined
      })
      expect(refused.map((r) => [r.id, r.reason])).to.deep.equal([
        ['b7:980', 'DuplicateIdentity'],
        ['b7:981', 'DuplicateIdentity'],
      ])
      expect(refused[0].message).to.include('/dev/loop980 has the same port identity as /dev/loop981 in class hotu')
      expect(await allocatable(env, 'devices.nfdctl.io/hotu')).to.equal(0)
      await waitFor('a DeviceRefused Event on the class', async () => (await classEvents('hotu')).some((e) => e.reason === 'DeviceRefused' && e.message.startsWith('DuplicateIdentity: ')))

      // Moved to another port (udev records it, the kernel says `change`): two devices, both served.
      await record(981, 'platform-hub-2')
      await writeFile('/sys/block/loop981/uevent', 'change')
      await waitFor('allocatable hotu=2', async () => (await allocatable(env, 'devices.nfdctl.io/hotu')) === 2, {timeoutMs: 15_000})
      // The class status goes out at most once a second, behind the device plugin kubelet already reads.
      await waitFor(
        'no disk refused in the status',
        async () => {
          const entry = (await nodeEntry('hotu')) as {refused?: unknown} | undefined
          return entry !== undefined && entry.refused === undefined
        },
        {timeoutMs: 5_000},
      )

      // A Class class with annotation access that also matches loop980: loop980 leaves both, so no pod gets it by annotation.
      await env.client.request('POST', classesPath, {
        body: deviceClassManifest('hotv', {annotationAccess: {namespaceSelector: {}}, match: [{devName: 'loop980', subsystem: 'block'}]}),
      })
      await waitFor('allocatable hotu=1', async () => (await allocatable(env, 'devices.nfdctl.io/hotu')) === 1, {timeoutMs: 15_000})
      pods.push('agent-overlap')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotv'}, command: ['sleep', '3600'], name: 'agent-overlap'})
      const overlap = await waitFor('loop980 refused in both classes', async () => {
        const entries = await Promise.all(['hotu', 'hotv'].map(async (name) => ((await nodeEntry(name)) as NodeEntry & {refused?: Array<{reason: string; message: string}>})?.refused ?? []))
        return entries.every((e) => e.length === 1) ? entries.flat() : undefined
      })
      expect(overlap.map((r) => r.reason)).to.deep.equal(['ExclusiveOverlap', 'ExclusiveOverlap'])
      expect(overlap[0].message).to.include('also in class hotv (allocation Class)')
      await sleep(500) // batches have run since the pod started: still nothing
      await expectNoDevice(pod.containerId, 980)
      expect(await readLoop(env.node, pod.containerId, 980)).to.match(/^failed: /)
    } finally {
      for (const name of ['hotu', 'hotv', 'hotc']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    }
  })

  it('a number owned by a class stays owned across a SIGKILL: a device held by limit unplugged while the agent is down, and a device of no class that takes its number later, cannot be opened by the container', async function () {
    const udevDir = join(dir, 'udev-owned')
    await mkdir(udevDir, {recursive: true})
    const serial = (value: string): Promise<void> => writeFile(join(udevDir, 'b7:985'), `E:ID_SERIAL=Lab_Disk_${value}\nE:ID_SERIAL_SHORT=${value}\n`)
    const stateDir = join(dir, 'state-owned')
    await env.client.request('POST', classesPath, {
      body: deviceClassManifest('hoto', {allocation: 'Device', match: [{devName: 'loop985', properties: {ID_SERIAL_SHORT: 'TENANT-A'}, subsystem: 'block'}]}),
    })
    await createClass()
    await serial('TENANT-A')
    await loops.add(985)
    try {
      agent = await startAgent({extraArgs: ['--udev-data-dir', udevDir], stateDir})
      await waitFor('allocatable hoto=1', async () => (await allocatable(env, 'devices.nfdctl.io/hoto')) === 1, {timeoutMs: 15_000})
      pods.push('agent-owned')
      const pod = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/hoto': '1'}, name: 'agent-owned'})
      expect(await readLoop(env.node, pod.containerId, 985)).to.equal('loop-985-data')

      // Killed: nothing it did is cleaned up, and kubelet's Allocate (not the agent) put the rule in the container.
      await agent.stop('SIGKILL')
      agent = undefined
      await loops.drop(985)
      expect(await loopRules(pod.containerId, 985), 'the rule kubelet gave, while the agent is away').to.deep.equal(['b 7:985 rw'])

      agent = await startAgent({extraArgs: ['--udev-data-dir', udevDir], stateDir})
      // Another tenant's disk takes the number; it is in no class, so only the record says the number was a class device's.
      await serial('TENANT-B')
      await loops.add(985)
      await waitFor('the rule for 7:985 gone', async () => (await loopRules(pod.containerId, 985)).length === 0, {timeoutMs: 10_000})
      const read = await readLoop(env.node, pod.containerId, 985)
      expect(read, read).to.match(/^failed: /)
      expect(read).to.match(/Operation not permitted|No such file/)
      // mknod is the container's (CAP_MKNOD): a node made by hand opens nothing either.
      const made = await env.node
        .exec(pod.containerId, ['sh', '-c', 'mknod /tmp/stolen b 7 985 && dd if=/tmp/stolen bs=13 count=1 status=none; echo " exit=$?"'])
        .catch((error: Error & {stderr?: string}) => `failed: ${error.stderr ?? error.message}`)
      expect(made).to.not.include('loop-985-data')
    } finally {
      await env.client.request('DELETE', `${classesPath}/hoto`).catch(() => {})
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it("never takes the runtime's own devices: with a class that matched /dev/null, then deleted, and the agent restarted, containers asking for another class (by limit, by annotation) keep a working /dev/null", async function () {
    this.timeout(90_000)
    const stateDir = join(dir, 'state-runtime')
    const ownedNumbers = async (): Promise<string[]> =>
      ((JSON.parse(await readFile(join(stateDir, 'owned-devices.json'), 'utf8').catch(() => '{"devices":[]}')) as {devices: Array<{type: string; major: number; minor: number}>}).devices ?? []).map(
        (d) => `${d.type}${d.major}:${d.minor}`,
      )
    // /dev/null works, is 1:3, and the container's devices cgroup allows it as runc did.
    const nullWorks = async (containerId: string, when: string): Promise<void> => {
      const out = await env.node.exec(containerId, ['sh', '-c', 'echo data > /dev/null && ls -l /dev/null && head -c 3 /dev/zero | wc -c'])
      expect(out, `${when}: /dev/null in ${containerId.slice(0, 12)}`).to.match(/^crw-rw-rw- .* 1, +3 .*\/dev\/null\n\s*3\s*$/)
      const {control} = await cgroupOf(containerId, 'v1')
      expect((await readDeviceRules(control.dir)).map(formatRule), when).to.include.members(['c 1:3 rwm', 'c 1:5 rwm'])
    }
    const revokedNull = (cli: CliProcess): boolean => cli.json<LogLine>().some((l) => l.msg === 'devices updated' && (l.revoked ?? []).some((n) => !n.startsWith('/dev/loop')))
    await env.client.request('POST', classesPath, {body: deviceClassManifest('hotn', {annotationAccess: {namespaceSelector: {}}, match: [{devName: 'null', subsystem: 'mem'}]})})
    await env.client.request('POST', classesPath, {body: deviceClassManifest('hotr', {annotationAccess: {namespaceSelector: {}}, capacity: 2, match: [{devName: 'loop810', subsystem: 'block'}]})})
    await createClass()
    await loops.add(810)
    const agents: CliProcess[] = []
    try {
      agent = await startAgent({stateDir})
      agents.push(agent)
      await agent.waitForLine<LogLine>('hotr registered', (l) => l.class === 'hotr' && l.state === 'registered', 20_000)
      await waitFor('/dev/null owned, as a device of class hotn', async () => (await ownedNumbers()).includes('c1:3'), {timeoutMs: 10_000})
      pods.push('agent-runtime-limit', 'agent-runtime-annotation')
      const byLimit = await runPod(env, {command: ['sleep', '3600'], limits: {'devices.nfdctl.io/hotr': '1'}, name: 'agent-runtime-limit'})
      const byAnnotation = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotr'}, command: ['sleep', '3600'], name: 'agent-runtime-annotation'})
      const containers = [byLimit.containerId, byAnnotation.containerId]
      // The agent has looked at both containers once the annotation's grant is made.
      for (const id of containers) await waitFor('loop810 allowed in the container', async () => (await loopRules(id, 810)).length > 0, {timeoutMs: 10_000})
      for (const id of containers) await nullWorks(id, 'with the class of /dev/null')
      for (const id of containers) expect(await readLoop(env.node, id, 810)).to.equal('loop-810-data')

      // A hot-plug makes the agent look at both containers again.
      await loops.drop(810)
      for (const id of containers) await waitFor('loop810 taken back', async () => (await loopRules(id, 810)).length === 0, {timeoutMs: 10_000})
      await loops.add(810)
      for (const id of containers) await waitFor('loop810 given back', async () => (await loopRules(id, 810)).length > 0, {timeoutMs: 10_000})
      for (const id of containers) await nullWorks(id, 'after a hot-plug')
      for (const id of containers) expect(await readLoop(env.node, id, 810)).to.equal('loop-810-data')

      await env.client.request('DELETE', `${classesPath}/hotn`)
      await waitFor('/dev/null forgotten once no class has it and no container holds it as given for a class', async () => !(await ownedNumbers()).includes('c1:3'), {timeoutMs: 10_000})
      for (const id of containers) await nullWorks(id, 'after the class was deleted')

      await agent.stop('SIGKILL')
      agent = await startAgent({stateDir})
      agents.push(agent)
      await loops.drop(810)
      for (const id of containers) await waitFor('loop810 taken back by the restarted agent', async () => (await loopRules(id, 810)).length === 0, {timeoutMs: 10_000})
      for (const id of containers) await nullWorks(id, 'after a restart and an unplug')
      expect((await ownedNumbers()).includes('c1:3')).to.equal(false)
      expect(agents.map(revokedNull), 'no agent revoked anything but a loop device').to.deep.equal([false, false])
    } finally {
      for (const name of ['hotn', 'hotr', 'hotc']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    }
  })

  it('follows its classes live: a new class is served and hot-plugged, a malformed one gets Valid=False and disturbs nothing, a broken edit keeps the last valid spec, a deleted class is withdrawn', async function () {
    const loopClass = (name: string, devName: string): object => deviceClassManifest(name, {annotationAccess: {namespaceSelector: {}}, match: [{devName, subsystem: 'block'}]})
    await createClass()
    await loops.add(998)
    try {
      agent = await startAgent()
      pods.push('agent-live')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc,hotl'}, command: ['sleep', '3600'], name: 'agent-live'})
      await waitFor('the pod reads loop998 (hotc)', async () => (await readLoop(env.node, pod.containerId, 998)) === 'loop-998-data', {timeoutMs: 10_000})
      // The status is written beside the grants, not before them: the pod reading the device does not mean it is there yet.
      await waitFor('hotc has its Valid condition', async () => (await validCondition('hotc')) !== undefined, {timeoutMs: 10_000})
      expect(await validCondition('hotc')).to.include({observedGeneration: 1, reason: 'SpecValid', status: 'True'})

      // Malformed (a glob that does not compile; the API server cannot tell): reported on the class, nothing else moves.
      await env.client.request('POST', classesPath, {body: loopClass('hotbad', 'loop99[')})
      const bad = await waitFor(
        'hotbad Valid=False',
        async () => {
          const c = await validCondition('hotbad')
          return c?.status === 'False' && c
        },
        {timeoutMs: 10_000},
      )
      expect(bad).to.include({observedGeneration: 1, reason: 'InvalidSpec'})
      expect(bad.message).to.match(/^invalid spec: spec\.match\[0\]\.devName: .*; the class is not served$/)
      expect(await nodeEntry('hotbad')).to.equal(undefined)
      expect(
        await lstat(join(env.node.pluginDir, 'nfdctl-hotbad.sock')).then(
          () => 'served',
          () => 'not served',
        ),
      ).to.equal('not served')

      // A class created while the agent runs: its plugin registers, and a device of it reaches the pod.
      await env.client.request('POST', classesPath, {body: loopClass('hotl', 'loop989')})
      await agent.waitForLine<LogLine>('hotl registered', (l) => l.class === 'hotl' && l.state === 'registered', 10_000)
      await loops.add(989)
      await waitFor('the pod reads loop989 (hotl)', async () => (await readLoop(env.node, pod.containerId, 989)) === 'loop-989-data', {timeoutMs: 10_000})
      expect(await readLoop(env.node, pod.containerId, 998)).to.equal('loop-998-data')

      // An edit that breaks hotl: generation 2 is reported invalid, generation 1 stays in use, the pod keeps loop989.
      await env.client.request('PATCH', `${classesPath}/hotl`, {body: {spec: {match: [{devName: 'loop98[', subsystem: 'block'}]}}, contentType: 'application/merge-patch+json'})
      const broken = await waitFor(
        'hotl Valid=False',
        async () => {
          const c = await validCondition('hotl')
          return c?.status === 'False' && c
        },
        {timeoutMs: 10_000},
      )
      expect(broken).to.include({observedGeneration: 2, reason: 'InvalidSpec'})
      expect(broken.message).to.match(/generation 1, the last valid one, stays in use$/)
      expect((await nodeEntry('hotl'))?.observedGeneration).to.equal(1)
      await sleep(500) // batches have run since
      expect(await readLoop(env.node, pod.containerId, 989)).to.equal('loop-989-data')

      // Deleted: its devices are withdrawn from the pod and its plugin's socket goes; hotc is untouched.
      await env.client.request('DELETE', `${classesPath}/hotl`)
      await waitFor('loop989 gone from the pod', async () => /No such file/.test(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop989']).catch(() => '')), {timeoutMs: 10_000})
      await waitFor(
        'the hotl socket removed',
        async () =>
          lstat(join(env.node.pluginDir, 'nfdctl-hotl.sock')).then(
            () => false,
            () => true,
          ),
        {timeoutMs: 5000},
      )
      expect(await readLoop(env.node, pod.containerId, 998)).to.equal('loop-998-data')
    } finally {
      for (const name of ['hotc', 'hotl', 'hotbad']) await env.client.request('DELETE', `${classesPath}/${name}`).catch(() => {})
    }
  })

  it('starts with the API server away: the persisted classes are served, and once it answers the pods get their devices and the status is written', async function () {
    await createClass()
    const stateDir = join(dir, 'state-outage')
    try {
      // A first run persists the classes.
      agent = await startAgent({stateDir})
      expect(await agent.stop('SIGTERM')).to.equal(0)
      agent = undefined
      pods.push('agent-outage')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-outage'})

      // The agent's API server address leads nowhere yet.
      const port = await freePort()
      const kubeconfig = join(dir, 'kubeconfig-outage')
      await writeFile(kubeconfig, (await readFile(agentKubeconfig, 'utf8')).replace(env.plane.server, `https://127.0.0.1:${port}`))
      const metricsPort = await freePort()
      agent = await startAgent({kubeconfig, metricsPort, stateDir})
      const persisted = agent.json<LogLine & {classes?: string[]}>().find((l) => l.msg.startsWith('the API server does not answer; using the classes persisted'))
      expect(persisted?.classes).to.deep.equal(['hotc'])
      const notReady = await fetch(`http://127.0.0.1:${metricsPort}/readyz`)
      expect(notReady.status).to.equal(503)
      expect(await notReady.text()).to.contain('pods not listed yet')
      await loops.add(998)

      const proxy = await DroppingProxy.start(new URL(env.plane.server), port)
      try {
        await waitFor('the pod reads loop998 once the API server answers', async () => (await readLoop(env.node, pod.containerId, 998)) === 'loop-998-data', {timeoutMs: 30_000})
        const entry = await waitFor(
          'the status entry with loop998 and the pod',
          async () => {
            const e = await nodeEntry('hotc')
            return e?.devices?.some((d) => d.devName === 'loop998') === true && e.holders === 1 && e
          },
          {timeoutMs: 10_000},
        )
        expect(entry.observedGeneration).to.equal(1)
        await waitFor('/readyz 200', async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status === 200, {timeoutMs: 10_000})
      } finally {
        await agent.stop('SIGTERM')
        agent = undefined
        await proxy.close()
      }
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it("cgroup v2: replaces the runtime's device program on the container's unified cgroup (hot-plug, unplug, nothing broader than asked), and recognises its own after a restart", async function () {
    await createClass()
    try {
      pods.push('agent-v2')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-v2'})
      const {control, spec} = await cgroupOf(pod.containerId, 'v2')
      expect(control.mode).to.equal('v2')
      // This host's runc attaches no program (hybrid cgroups): attach what it would, from the container's OCI spec.
      // What runc 1.2.0-1.2.3 builds: the spec's rules (CRI's deny-all), then its standard devices without
      // /dev/net/tun. The agent's program must keep exactly these, and not add tun as runc 1.1 would have.
      const specRules = runcDeviceRules(spec, {tun: false})
      attachRuntimeProgram(control.dir, specRules)
      const runtime = devicePrograms(control.dir)
      expect(runtime.map((p) => p.name)).to.deep.equal(['runtime'])

      agent = await startAgent({extraArgs: ['--cgroup-mode', 'v2']})
      await loops.add(998)
      await waitFor('the pod reads loop998 (v1 rule and v2 program)', async () => (await readLoop(env.node, pod.containerId, 998)) === 'loop-998-data', {intervalMs: 20, timeoutMs: 10_000})
      const granted = devicePrograms(control.dir)
      expect(
        granted.map((p) => p.name),
        "one program, the agent's, in the place of the runtime's",
      ).to.deep.equal([agentProgramName])
      const {rules} = granted[0].rules!
      expect(rules.at(-1)).to.deep.include({access: 'rw', allow: true, major: 7, minor: 998, type: 'b'})
      expect(rules.slice(0, -1), "the rest is exactly the container's own rules").to.deep.equal(emulateRules(specRules).rules)
      expect(
        rules.filter((r) => r.type === 'c' && r.major === 10 && r.minor === 200),
        '/dev/net/tun',
      ).to.deep.equal([])
      // The standard devices still work under the agent's program (runc allows them beside the spec's rules).
      expect(await env.node.exec(pod.containerId, ['sh', '-c', 'dd if=/dev/zero of=/dev/null bs=1 count=3 2>&1 && head -c 3 /dev/urandom | wc -c'])).to.match(/3\+0 records out[\s\S]*\b3\n?$/)

      // Unplugged: the program goes back to the container's own rules.
      await loops.drop(998)
      await waitFor('loop998 gone from the pod', async () => /No such file/.test(await env.node.execFailure(pod.containerId, ['ls', '/dev/loop998']).catch(() => '')), {timeoutMs: 10_000})
      await waitFor('the program without loop998', async () => isDeepStrictEqual(devicePrograms(control.dir)[0]?.rules?.rules, emulateRules(specRules).rules), {timeoutMs: 5000})

      // Plugged again, then the agent restarted in auto mode: it finds its program (v2), and changes nothing.
      await loops.add(998)
      await waitFor('the pod reads loop998 again', async () => (await readLoop(env.node, pod.containerId, 998)) === 'loop-998-data', {timeoutMs: 10_000})
      expect(await agent.stop('SIGTERM')).to.equal(0)
      const before = devicePrograms(control.dir)[0].id
      agent = await startAgent()
      await sleep(1500)
      expect(agent.json<LogLine>().filter((l) => l.msg === 'devices updated')).to.deep.equal([])
      expect(devicePrograms(control.dir).map((p) => p.id)).to.deep.equal([before])
      expect(await readLoop(env.node, pod.containerId, 998)).to.equal('loop-998-data')
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })

  it("cgroup v2: a device program not of runc's shape is left exactly as it is, and said so once", async function () {
    await createClass()
    try {
      pods.push('agent-v2-foreign')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-v2-foreign'})
      const {dir} = (await cgroupOf(pod.containerId, 'v2')).control
      // Allows everything but in another shape than runc's (r0 = 1, exit): the agent cannot read it.
      attachProgram(dir, Buffer.from('b700000001000000' + '9500000000000000', 'hex'), 'foreign')
      const [attached] = devicePrograms(dir)
      expect(attached.rules).to.equal(undefined)

      agent = await startAgent()
      await loops.add(998)
      const warning = await agent.waitForLine<LogLine & {err?: string}>('the warning', (l) => l.msg === "cannot change the container's device program; its devices are left as they are", 10_000)
      expect(warning.value.err).to.match(/"foreign".* is not of runc's shape/)
      await sleep(500)
      expect(
        devicePrograms(dir).map((p) => p.id),
        'the program untouched',
      ).to.deep.equal([attached.id])
      expect(await readLoop(env.node, pod.containerId, 998)).to.match(/^failed/) // not granted: neither the v1 rule nor a node
      expect(agent.json<LogLine>().filter((l) => l.msg === "cannot change the container's device program; its devices are left as they are")).to.have.length(1)
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })
  it('a device unplugged while the agent is stopped: the restarted agent takes its rule and node back (from its grant record), and forgets the container once it is gone', async function () {
    await loops.add(993)
    await createClass()
    const stateDir = join(dir, 'state-unplug')
    const recorded = async (): Promise<Record<string, Array<{type: string; major: number; minor: number; access: string; devNode: string}>>> =>
      (JSON.parse(await readFile(join(stateDir, 'grants.json'), 'utf8')) as {containers: Record<string, never>}).containers
    try {
      agent = await startAgent({stateDir})
      pods.push('agent-unplug-away')
      const pod = await runPod(env, {annotations: {'devices.nfdctl.io/main': 'hotc'}, command: ['sleep', '3600'], name: 'agent-unplug-away'})
      await waitFor('the pod reads loop993', async () => (await readLoop(env.node, pod.containerId, 993)) === 'loop-993-data', {timeoutMs: 10_000})
      expect((await recorded())[pod.containerId]).to.deep.equal([{access: 'rw', devNode: '/dev/loop993', major: 7, minor: 993, type: 'b'}])

      // Unplugged while no agent runs: nothing takes the rule back yet.
      expect(await agent.stop('SIGTERM')).to.equal(0)
      agent = undefined
      await loops.drop(993)
      expect(await loopRules(pod.containerId, 993), 'the rule while the agent is away').to.deep.equal(['b 7:993 rw'])

      // The new agent never saw loop993; the records say the rule is its own and its device is gone: it is
      // taken at start (the start sweep, before the API server is asked), and the first batch finds nothing left.
      agent = await startAgent({stateDir})
      await waitFor('the rule for loop993 gone', async () => (await loopRules(pod.containerId, 993)).length === 0, {timeoutMs: 10_000})
      await expectNoDevice(pod.containerId, 993)
      const swept = agent.json<LogLine>().filter((l) => l.msg.includes('taken back at start'))
      expect(swept.map((l) => [l.pod, l.revoked])).to.deep.equal([['default/agent-unplug-away', ['/dev/loop993']]])
      expect(agent.json<LogLine>().filter((l) => l.msg === 'devices updated')).to.deep.equal([])
      await waitFor('the record without loop993', async () => (await recorded())[pod.containerId] === undefined, {timeoutMs: 5000})

      // A later device with the same numbers is not the container's until the agent gives it (it is in hotc: it does).
      await loops.add(993)
      await waitFor('loop993 given again, and recorded', async () => (await recorded())[pod.containerId]?.length === 1, {timeoutMs: 10_000})

      // The container gone (removed from containerd, as kubelet's container GC does within a minute): its record goes.
      await deletePods(env, pods.splice(pods.indexOf('agent-unplug-away'), 1))
      await waitFor(
        'the container stopped by kubelet and removed',
        () =>
          env.node.containerd.ctr('-n', 'k8s.io', 'containers', 'rm', pod.containerId).then(
            () => true,
            () => false,
          ),
        {timeoutMs: 30_000},
      )
      await waitFor('the record without the container', async () => !(pod.containerId in (await recorded())), {timeoutMs: 10_000})
    } finally {
      await env.client.request('DELETE', `${classesPath}/hotc`).catch(() => {})
    }
  })
})

/** One sample of the agent's /metrics, by its name with labels as exposed; NaN when it is not there. */
async function metric(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name} `))
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1))
}
