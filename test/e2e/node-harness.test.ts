import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {lstat, readdir, readFile, readlink, stat} from 'node:fs/promises'

import {promisify} from 'node:util'

import {kubernetesServiceIp} from '../controlplane/control-plane.js'
import {kubeletPluginDir} from '../node/host-changes.js'
import {netnsPath, netnsVariable, nodeIp} from '../node/netns.js'
import {createNamespace, deletePods, podLog, runPod, stopTestNode, testNode, waitForPod, type NodeEnv} from '../support/test-node.js'
import {waitFor} from '../support/wait.js'

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
    expect(node.status.nodeInfo.kubeletVersion).to.equal('v1.37.2')
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

async function processesOf(binary: string): Promise<number> {
  let count = 0
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    if ((await readlink(`/proc/${pid}/exe`).catch(() => '')) === binary) count++
  }
  return count
}
