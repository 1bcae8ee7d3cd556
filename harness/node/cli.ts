// npm run node:up / node:down: a control plane and a real node (containerd + kubelet) to try nfdctl by hand.
// Both run inside the network namespace nfdctl-node, which stays until node:down.
import {spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {ControlPlane} from '../controlplane/control-plane.js'
import {ensureBinaries, repoRoot} from '../controlplane/paths.js'
import {removeLeftoverLoops} from '../devices/loop-devices.js'
import {loopIndexes} from '../devices/loop-owners.js'
import {createNetns, deleteNetns, netnsPath, netnsVariable, nodeIp} from './netns.js'
import {TestNode} from './node.js'

const netns = 'nfdctl-node'
const dir = join(repoRoot, '.node')
const nodeName = 'nfdctl-node'
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

const command = process.argv[2]
if (command !== 'up' && command !== 'down') {
  log('usage: tsx harness/node/cli.ts up|down')
  process.exit(2)
}
if (process.getuid?.() !== 0) {
  log('node: needs root (containerd, kubelet, cgroups, network namespaces)')
  process.exit(2)
}

if (process.env[netnsVariable] === undefined) {
  // The launcher half: make (or find) the namespace and run this script again inside it.
  if (command === 'up' && !existsSync(netnsPath(netns))) await createNetns(netns)
  if (command === 'down' && !existsSync(netnsPath(netns))) {
    log('node: none was running')
    process.exit(removeDemoLoops())
  }
  const result = spawnSync('nsenter', [`--net=${netnsPath(netns)}`, '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    env: {...process.env, [netnsVariable]: netns},
    stdio: 'inherit',
  })
  if (command === 'down' || result.status !== 0) await deleteNetns(netns)
  process.exit(command === 'down' ? Math.max(result.status ?? 1, removeDemoLoops()) : (result.status ?? 1))
}

/**
 * The demo's loop devices are the kernel's, not the node's: stopping the node leaves them unless removed
 * here, once no container of the node holds them open. Returns the exit code its part adds.
 */
function removeDemoLoops(): number {
  try {
    const removed = removeLeftoverLoops(loopIndexes('scripts/demo/device-half.ts'))
    if (removed.length > 0) log(`node: removed the demo's ${removed.map((index) => `/dev/loop${index}`).join(', ')}`)
    return 0
  } catch (error) {
    log(`node: ${(error as Error).message}`)
    return 1
  }
}

if (command === 'up') {
  await TestNode.stopDetached(join(dir, 'node'))
  await ControlPlane.stopDetached(join(dir, 'controlplane'))
  await rm(dir, {force: true, recursive: true})
  const binDir = await ensureBinaries(log, ['containerd', 'kubelet', 'kube-scheduler', 'kube-controller-manager'])
  const plane = await ControlPlane.start({
    apiserverFlags: ['--kubelet-preferred-address-types=InternalIP'],
    binDir,
    cluster: {nodeIp},
    detached: true,
    dir: join(dir, 'controlplane'),
    log,
  })
  const client = await plane.client()
  try {
    await TestNode.start({binDir, detached: true, dir: join(dir, 'node'), kubeconfig: plane.kubeconfig, log, nodeName}, client)
  } finally {
    client.close()
  }
  log(`node: ${nodeName} is Ready. Everything runs in the network namespace ${netns}; reach it with`)
  log(`  nsenter --net=${netnsPath(netns)} -- bin/dev.js devices list --kubeconfig ${plane.kubeconfig} --node-name ${nodeName}`)
  log(`  (plugins go to /var/lib/kubelet/device-plugins; logs in ${dir}); stop it with npm run node:down`)
  process.stdout.write(plane.kubeconfig + '\n')
} else {
  const stopped = await TestNode.stopDetached(join(dir, 'node'))
  await ControlPlane.stopDetached(join(dir, 'controlplane'))
  await rm(dir, {force: true, recursive: true})
  log(stopped ? 'node: stopped, host restored' : 'node: none was running')
}
