import {expect} from 'chai'
import {mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import type {DoctorReport} from '../../src/lib/doctor/findings.js'
import {claimPodManifest, claimTemplateManifest, draAgentArgs, type SerialDisks} from '../../harness/devices/dra-agent.js'
import {type BackedLoops, loopData, readLoop} from '../../harness/devices/loop-devices.js'
import {createNamespace, deletePods, waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {nfdctl} from '../support/run-cli.js'
import {serialDiskNode} from '../support/test-node.js'

// Loop devices 870-879 belong to these tests. A runtime that does not apply the agent's CDI specs (containerd 1.7
// with its default enable_cdi = false, or cdi_spec_dirs without the agent's --cdi-dir) would start a claim's
// container without its device; the agent reads containerd's CRI configuration and refuses the claims instead,
// saying why where the operator looks. Here the agent writes its specs where the node's containerd 2 does not read.
const dra = '/apis/resource.k8s.io/v1'
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const namespace = 'nfdctl-dra-runtime-cdi'

interface ClassStatus {
  status?: {nodes?: Array<{node: string; problems?: Array<{reason: string; message?: string}>}>}
}

describe('devices agent --dra on a node whose runtime does not read its CDI specs', function () {
  let env: NodeEnv
  let dir: string
  let udevDir: string
  let loops: BackedLoops
  let disks: SerialDisks
  let agent: CliProcess | undefined
  let elsewhere: string

  const startAgent = async (cdiDir?: string): Promise<void> => {
    agent = new CliProcess(draAgentArgs(env.node, {cdiDir, kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir}))
    await agent.waitForLine<{msg: string}>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
  }
  const problemsOnNode = async (): Promise<Array<{reason: string; message?: string}> | undefined> => {
    const got = await env.client.request<ClassStatus>('GET', `${classesPath}/drac`)
    return got.status?.nodes?.find((n) => n.node === env.node.name)?.problems
  }

  before(async function () {
    this.timeout(120_000)
    ;({dir, disks, env, loops, udevDir} = await serialDiskNode(this, 'nfdctl-rcdi'))
    elsewhere = join(dir, 'cdi-nobody-reads')
    await mkdir(elsewhere)
    await createNamespace(env, namespace)
    await env.client.request('POST', classesPath, {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'drac'}, spec: {allocation: 'DRA', match: [{devName: 'loop87[0-9]', subsystem: 'block'}]}},
    })
    await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {body: claimTemplateManifest('one-disk', 'drac.devices.nfdctl.io')})
    await disks.record(870, 'a')
    await loops.add(870)
    await startAgent(elsewhere)
    await waitFor('drac.devices.nfdctl.io', () => env.client.request('GET', `${dra}/deviceclasses/drac.devices.nfdctl.io`).catch(() => undefined))
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && agent) console.log(agent.transcript())
    await agent?.stop('SIGTERM')
    await deletePods(env, [`${namespace}/waits`])
    for (const i of loops.plugged) await loops.drop(i)
    await env.client.request('DELETE', `${classesPath}/drac`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
    await rm(dir, {force: true, recursive: true})
  })

  it("the class's node entry and an Event say why, and so does doctor --node (ok once given the directory containerd reads)", async function () {
    this.timeout(60_000)
    const problems = await waitFor('the problem in the node entry', problemsOnNode, {timeoutMs: 30_000})
    expect(problems.map((p) => p.reason)).to.deep.equal(['RuntimeWithoutCDI'])
    expect(problems[0].message).to.include(`not from ${elsewhere} where the agent writes them`).and.include(env.node.containerd.cdiDir)
    const events = await waitFor('the Event on the class', async () => {
      const list = await env.client.request<{items: Array<{source?: {host?: string}}>}>('GET', '/api/v1/namespaces/default/events', {
        query: {fieldSelector: 'involvedObject.name=drac,involvedObject.kind=DeviceClass,reason=RuntimeWithoutCDI'},
      })
      return list.items.length > 0 ? list.items : undefined
    })
    expect(events.map((e) => e.source?.host)).to.deep.equal([env.node.name])

    const doctor = async (cdiDir: string) => {
      const run = await nfdctl<DoctorReport>(['doctor', '--kubeconfig', env.plane.kubeconfig, '--node', '--containerd-address', env.node.containerd.socket, '--cdi-dir', cdiDir, '-o', 'json'])
      return (JSON.parse(run.stdout) as DoctorReport).findings.find((f) => f.check === "containerd's CDI (DRA claims)")
    }
    expect(await doctor(elsewhere)).to.include({status: 'fail'})
    expect((await doctor(elsewhere))?.fix).to.include(`add ${elsewhere} to containerd's cdi_spec_dirs`)
    expect(await doctor(env.node.containerd.cdiDir)).to.include({status: 'ok'})
  })

  it('a pod with a claim of the class waits with kubelet saying why (FailedPrepareDynamicResources), and runs with its device once the agent writes where containerd reads', async function () {
    this.timeout(180_000)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPodManifest('waits', env.node.name, {template: 'one-disk'})})
    const told = await waitFor(
      "kubelet's Event on the pod",
      async () => {
        const list = await env.client.request<{items: Array<{reason: string; message: string}>}>('GET', `/api/v1/namespaces/${namespace}/events`, {
          query: {fieldSelector: 'involvedObject.name=waits,involvedObject.kind=Pod'},
        })
        return list.items.find((e) => e.message.includes('does not read') || e.message.includes('not from'))
      },
      {timeoutMs: 60_000},
    )
    expect(told.reason).to.equal('FailedPrepareDynamicResources')
    expect(told.message).to.include(`node ${env.node.name}: the container runtime reads CDI specs from`)
    const phase = (await env.client.request<{status?: {phase?: string}}>('GET', `/api/v1/namespaces/${namespace}/pods/waits`)).status?.phase
    expect(phase).to.equal('Pending')

    await agent?.stop('SIGTERM')
    await startAgent()
    await waitFor('the problem gone from the node entry', async () => (await problemsOnNode()) === undefined, {timeoutMs: 30_000})
    const running = await waitForPod(env, `${namespace}/waits`, 120_000)
    await waitFor('waits reads /dev/loop870', async () => (await readLoop(env.node, running.containerId, 870)) === loopData(870), {intervalMs: 50, timeoutMs: 10_000})
  })
})
