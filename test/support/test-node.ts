import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {ensureBinaries} from '../../harness/controlplane/paths.js'
import {SerialDisks} from '../../harness/devices/dra-agent.js'
import {BackedLoops, canUseLoopControl} from '../../harness/devices/loop-devices.js'
import {nodeIp, outsideTestNetns} from '../../harness/node/netns.js'
import {TestNode} from '../../harness/node/node.js'
import type {NodeEnv} from '../../harness/node/pods.js'
import {startControlPlane} from './cluster.js'
import {missingPrerequisite} from './prerequisites.js'
import {stopAtRunEnd} from './run-end.js'

const log = (line: string): void => {
  process.stderr.write(`      ${line}\n`)
}

let shared: Promise<NodeEnv> | undefined
let dir: string | undefined

/**
 * The run's one real node (containerd + kubelet) on its own control plane, started on first use and
 * stopped at the end of the run. One node at a time: it owns /var/lib/kubelet/device-plugins.
 */
export async function testNode(context: Mocha.Context): Promise<NodeEnv> {
  context.timeout(15 * 60_000) // a cold kubelet build on 2 cores
  if (process.getuid?.() !== 0) missingPrerequisite(context, 'a real node (containerd, kubelet, cgroups) needs root')
  const outside = await outsideTestNetns()
  if (outside !== undefined) missingPrerequisite(context, outside)
  // containerd and ctr come from the control-plane build; the runtime they drive is Debian's runc.
  await promisify(execFile)('runc', ['--version']).catch(() => missingPrerequisite(context, 'runc is not installed (apt-get install runc)'))
  shared ??= (async () => {
    const binDir = await ensureBinaries(log, ['containerd', 'kubelet', 'kube-scheduler', 'kube-controller-manager'])
    const plane = await startControlPlane(context, ['--kubelet-preferred-address-types=InternalIP'], {nodeIp})
    const client = await plane.client()
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-node-'))
    const node = await TestNode.start({binDir, dir, kubeconfig: plane.kubeconfig, log, nodeName: `nfdctl-test-${process.pid}`}, client)
    return {client, node, plane}
  })()
  return shared
}

/** Stops the node (before the control planes): the host is put back and checked for leftovers. */
export async function stopTestNode(): Promise<void> {
  if (shared === undefined) return
  const env = await shared.catch(() => undefined)
  shared = undefined
  if (env === undefined) return
  await env.node.stop()
  const left = await env.node.host.leftovers()
  env.client.close()
  if (dir !== undefined) await rm(dir, {force: true, recursive: true})
  if (left.length > 0) throw new Error(`the test node left things on the host: ${left.join('; ')}`)
}

stopAtRunEnd(stopTestNode)

/** A further node beside the run's node, and how to stop it. */
export interface FurtherNode {
  readonly env: NodeEnv
  /** Stops the node and removes its directory; throws when it left something on the host. Idempotent. */
  stop(): Promise<void>
}

/**
 * A second real node (index 1: its own containerd, kubelet root, device-plugin directory in its own mount
 * namespace, address and pod subnet) registered with the run's control plane, for the suites that need two
 * nodes; the others never pay for it. The suite stops it in its `after`; the run's end stops it too, before
 * the first node, when a failure skipped that.
 */
export async function startSecondNode(context: Mocha.Context): Promise<FurtherNode> {
  const first = await testNode(context)
  const binDir = await ensureBinaries(log, ['containerd', 'kubelet'])
  const nodeDir = await mkdtemp(join(tmpdir(), 'nfdctl-node-b-'))
  let stopped: Promise<void> | undefined
  let node: TestNode | undefined
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      if (node === undefined) return
      await node.stop()
      const left = await node.host.leftovers()
      await rm(nodeDir, {force: true, recursive: true})
      if (left.length > 0) throw new Error(`the second test node left things on the host: ${left.join('; ')}`)
    })())
  stopAtRunEnd(stop)
  node = await TestNode.start({binDir, dir: nodeDir, index: 1, kubeconfig: first.plane.kubeconfig, log, nodeName: `nfdctl-test-${process.pid}-b`}, first.client)
  return {env: {client: first.client, node, plane: first.plane}, stop}
}

/** The test node with loop disks that carry udev serials, in a scratch directory of their own (a DRA suite's set-up). */
export interface SerialDiskNode {
  readonly env: NodeEnv
  readonly dir: string
  /** The agent's --udev-data-dir: the disks' serials are recorded here. */
  readonly udevDir: string
  readonly disks: SerialDisks
  readonly loops: BackedLoops
}

/** The test node, and serial disks named `<serialPrefix>-…`; fails under CI (skips otherwise) without loop control. */
export async function serialDiskNode(context: Mocha.Context, serialPrefix: string): Promise<SerialDiskNode> {
  const env = await testNode(context)
  if (!canUseLoopControl()) missingPrerequisite(context, '/dev/loop-control is not usable (needs root and the loop driver)')
  const dir = await mkdtemp(join(tmpdir(), `${serialPrefix}-`))
  const udevDir = join(dir, 'udev')
  await mkdir(udevDir, {recursive: true})
  return {dir, disks: new SerialDisks(udevDir, serialPrefix), env, loops: new BackedLoops(dir), udevDir}
}
