import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {lstat, readdir, readFile, readlink, stat} from 'node:fs/promises'

import {promisify} from 'node:util'

import {kubeletPluginDir} from '../node/host-changes.js'
import {netnsPath, netnsVariable, nodeIp} from '../node/netns.js'
import {deletePods, podLog, runPod, stopTestNode, testNode, type NodeEnv} from '../support/test-node.js'
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
