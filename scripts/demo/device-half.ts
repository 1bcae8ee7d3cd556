// The demo's device half (root): the local node of `npm run node:up`, the image built from HEAD, the agent
// DaemonSet from deploy/agent, and a loop device plugged in on the host while a pod that asked for it runs.
import {existsSync} from 'node:fs'
import {mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import {containerdBinary, ensureBinaries, repoRoot} from '../../harness/controlplane/paths.js'
import {removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {loopIndexes} from '../../harness/devices/loop-owners.js'
import {netnsPath} from '../../harness/node/netns.js'
import {nodeLayoutPatch, shippedImage, writeOverlay} from '../../harness/node/workloads.js'
import {waitFor} from '../../harness/process/wait.js'
import {grantsOf, secondsBetween, timedLines} from './log-lines.js'
import {run, say, shown} from './show.js'

/** This machine's platform, as the image index and `ctr --platform` name it: the node runs here. */
const nodePlatform = `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`

/** What npm run node:up makes (harness/node/cli.ts): the namespace, the node's name and where it keeps its files. */
export const netns = 'nfdctl-node'
export const nodeRoot = join(repoRoot, '.node')
const nodeDir = join(nodeRoot, 'node')
/** The demo's own files; npm run node:up and node:down remove .node/ with everything in it. */
const demoDir = join(nodeRoot, 'demo')
export const nodeKubeconfig = join(nodeRoot, 'controlplane', 'kubeconfig')

/** The demo's own loop devices (loop-owners.ts); it plugs the first and removes any of them an earlier run left, as npm run node:down does. */
export const demoLoops = loopIndexes('scripts/demo/device-half.ts')
export const demoLoop = demoLoops[0]!
const className = 'demo-loop'
const namespace = 'nfdctl-demo'
const nodeImage = 'localhost/nfdctl-test/busybox:1'
const loopText = `hello from the host (loop${demoLoop})`

export interface DeviceHalf {
  /** The kubectl binary the steps ran (built with the control plane). */
  readonly kubectl: string
}

const tsx = (script: string, ...args: string[]): string[] => [process.execPath, ...process.execArgv, join(repoRoot, script), ...args]

/** Runs the device half; resolves with what the closing lines tell the reader. */
export async function deviceHalf(): Promise<DeviceHalf> {
  say('the device half: a local node (containerd, kubelet, kube-scheduler, kube-controller-manager) in the network namespace nfdctl-node')
  const binDir = await ensureBinaries((line) => process.stderr.write(line + '\n'), ['containerd', 'kubelet', 'kube-scheduler', 'kube-controller-manager', 'kubectl'])
  const kubectlBin = join(binDir, 'kubectl')
  if (existsSync(netnsPath(netns))) await run(tsx('harness/node/cli.ts', 'down'), {display: 'npm run node:down   # the node an earlier run left'})
  await removeDemoLoops()
  await run(tsx('harness/node/cli.ts', 'up'), {capture: true, display: 'npm run node:up'})
  const kubectl = (display: string, args: readonly string[], options: {capture?: boolean; input?: string; quiet?: boolean} = {}): Promise<string> =>
    run(['nsenter', `--net=${netnsPath(netns)}`, '--', kubectlBin, '--kubeconfig', nodeKubeconfig, ...args], {...options, display: options.quiet ? undefined : `kubectl ${display}`})
  const k = (...args: string[]): Promise<string> => kubectl(args.join(' '), args)

  say(`the image, built from HEAD (${nodePlatform}), given to the node`)
  await mkdir(demoDir, {recursive: true})
  const archive = (
    await run(tsx('scripts/image/cli.ts', '--platform', nodePlatform, '--out', demoDir), {capture: true, display: `npm run image -- --platform ${nodePlatform} --out ${shown(demoDir)}`})
  )
    .trim()
    .split('\n')
    .at(-1)!
  const socket = await containerdSocket()
  // The node's own ctr (containerd 2, built with the control plane): the same release as the containerd it
  // talks to. It takes only an absolute socket path (a relative one reads as a URL's host).
  const ctr = containerdBinary(binDir, 'ctr')
  await run([ctr, '--address', socket, '-n', 'k8s.io', 'images', 'import', '--platform', nodePlatform, archive], {
    display: `${shown(ctr)} --address ${socket} -n k8s.io images import --platform ${nodePlatform} ${shown(archive)}`,
  })
  const ref = await imageRef(archive)

  say("the agent DaemonSet from deploy/agent, with an overlay for where this node keeps containerd, pod-resources and the agent's state")
  process.stdout.write(`$ export KUBECONFIG=${nodeKubeconfig}\n$ alias kubectl='nsenter --net=${netnsPath(netns)} -- ${kubectlBin}'\n`)
  for (const sub of ['state', 'cdi', 'udev']) await mkdir(join(demoDir, sub), {recursive: true})
  const overlay = await writeOverlay({
    component: 'agent',
    image: {name: ref.name, tag: ref.tag},
    patches: [nodeLayoutPatch('nfdctl-agent', {containerdDir: dirname(socket), dir: demoDir, podResourcesDir: join(nodeDir, 'kubelet', 'root', 'pod-resources')})],
  })
  try {
    await run(['cat', join(overlay, 'kustomization.yaml')], {display: `cat ${join(overlay, 'kustomization.yaml')}`})
    await kubectl(`apply -k ${overlay}`, ['apply', '-k', overlay])
  } finally {
    await rm(overlay, {force: true, recursive: true})
  }
  await k('-n', 'nfdctl-system', 'rollout', 'status', 'daemonset/nfdctl-agent', '--timeout=3m')

  say(`a DeviceClass of the loop devices ${demoLoops[0]}-${demoLoops.at(-1)}, and a pod in a namespace it admits that asks for it by annotation`)
  const classFile = join(demoDir, 'demo-loop.yaml')
  const podFile = join(demoDir, 'reader.yaml')
  await writeFile(classFile, classYaml())
  await writeFile(podFile, podYaml())
  await run(['cat', classFile], {display: `cat ${shown(classFile)}`})
  await k('apply', '-f', shown(classFile))
  // The ServiceAccount admission refuses a pod until kube-controller-manager made the namespace's default account.
  await waitFor(
    'the default ServiceAccount of nfdctl-demo',
    async () => (await kubectl('', ['-n', namespace, 'get', 'serviceaccount', 'default', '-o', 'name'], {capture: true, quiet: true})).trim() !== '',
    {timeoutMs: 30_000},
  )
  await run(['cat', podFile], {display: `cat ${shown(podFile)}`})
  await k('apply', '-f', shown(podFile))
  await k('-n', namespace, 'wait', '--for=condition=Ready', 'pod/reader', '--timeout=2m')
  await k('-n', namespace, 'logs', 'reader')

  say(`hot-plug: /dev/loop${demoLoop} appears on the host, bound to a file that says "${loopText}"`)
  const backing = join(demoDir, `loop${demoLoop}.img`)
  await writeFile(backing, Buffer.concat([Buffer.from(loopText), Buffer.alloc(4096 - loopText.length)]))
  const plugged = new Date()
  await run(['losetup', `/dev/loop${demoLoop}`, backing], {display: `losetup /dev/loop${demoLoop} ${shown(backing)}`})
  const read = await waitFor(
    `the pod's first read of /dev/loop${demoLoop}`,
    async () => timedLines(await kubectl('', ['-n', namespace, 'logs', 'reader', '--timestamps'], {capture: true, quiet: true})).find((l) => l.text.startsWith('read ')),
    {timeoutMs: 30_000},
  ).catch(async (error: unknown) => {
    await k('-n', namespace, 'logs', 'reader').catch(() => '')
    await k('-n', 'nfdctl-system', 'logs', 'daemonset/nfdctl-agent', '--tail=20').catch(() => '')
    throw error
  })
  await k('-n', namespace, 'logs', 'reader')
  const agentLog = await kubectl(`-n nfdctl-system logs daemonset/nfdctl-agent | grep '"devices updated"'`, ['-n', 'nfdctl-system', 'logs', 'daemonset/nfdctl-agent'], {capture: true})
  const grants = grantsOf(agentLog, `/dev/loop${demoLoop}`)
  for (const grant of grants) process.stdout.write(grant.line + '\n')
  const agentPart = grants[0] === undefined ? '' : `; the agent pod granted it after ${secondsBetween(plugged, grants[0].at)}`
  say(`plugged → read by the pod itself: ${secondsBetween(plugged, read.at)} (the time of the pod's log line; it looks every 0.1 s)${agentPart}`)
  return {kubectl: kubectlBin}
}

/** Removes the demo's loop devices an earlier run left (bound or not): the devices are the kernel's, not the node's. */
async function removeDemoLoops(): Promise<void> {
  for (const index of demoLoops) {
    if (!existsSync(`/sys/block/loop${index}`)) continue
    await run(['losetup', '-d', `/dev/loop${index}`], {display: `losetup -d /dev/loop${index}   # left by an earlier run`, quiet: true})
    removeLoopDevice(index)
  }
}

async function containerdSocket(): Promise<string> {
  const state = JSON.parse(await readFile(join(nodeDir, 'state.json'), 'utf8')) as {containerdSocket: string}
  return state.containerdSocket
}

/** The name the archive's index gives its image (ghcr.io/nfdctl/nfdctl:<version>), split as kustomize's `images:` takes it. */
async function imageRef(archive: string): Promise<{name: string; tag: string}> {
  const index = await run(['tar', '-xOf', archive, 'index.json'], {capture: true})
  const ref = (JSON.parse(index) as {manifests: Array<{annotations?: Record<string, string>}>}).manifests[0]?.annotations?.['io.containerd.image.name'] ?? `${shippedImage}:latest`
  const colon = ref.lastIndexOf(':')
  return {name: ref.slice(0, colon), tag: ref.slice(colon + 1)}
}

function classYaml(): string {
  return `# The class: the loop devices ${demoLoops[0]}-${demoLoops.at(-1)}, which pods in namespaces labelled nfdctl-demo/devices=allowed may
# take by annotation (the agent enforces it; deploy/agent's admission policy refuses other namespaces' pods).
apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata:
  name: ${className}
spec:
  match:
  - {subsystem: block, devName: "loop${String(demoLoop).slice(0, -1)}[0-9]"}
  annotationAccess:
    namespaceSelector:
      matchLabels: {nfdctl-demo/devices: allowed}
---
apiVersion: v1
kind: Namespace
metadata:
  name: ${namespace}
  labels: {nfdctl-demo/devices: allowed}
`
}

function podYaml(): string {
  const dev = `/dev/loop${demoLoop}`
  return `# Asks for the class for its container main; prints what it reads from ${dev} whenever that changes.
apiVersion: v1
kind: Pod
metadata:
  name: reader
  namespace: ${namespace}
  annotations:
    devices.nfdctl.io/main: ${className}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ${nodeImage}
    imagePullPolicy: Never
    command:
    - sh
    - -c
    - |
      echo "waiting for ${dev}"
      last=
      while true; do
        data=$(dd if=${dev} bs=${loopText.length} count=1 status=none 2>/dev/null)
        if [ "$data" != "$last" ]; then
          if [ -n "$data" ]; then echo "read ${dev}: $data"; else echo "${dev}: nothing to read"; fi
        fi
        last=$data
        sleep 0.1
      done
`
}
