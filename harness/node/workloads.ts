import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, readFile, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join, relative} from 'node:path'
import {promisify} from 'node:util'

import {stringify} from 'yaml'

import {ContainerdClient} from '../../src/lib/runtime/containerd-client.js'
import type {Manifest} from '../controlplane/manifests.js'
import {ensureBinaries, repoRoot} from '../controlplane/paths.js'
import {waitFor} from '../process/wait.js'
import type {NodeEnv} from './pods.js'

const run = promisify(execFile)

/** The image name every shipped manifest and the chart's default values give. */
export const shippedImage = 'ghcr.io/nfdctl/nfdctl'

/** What the node tests run: the built image's archive, and the name they give it on the node. */
export interface NodeImage {
  readonly archive: string
  /** The name the archive carries (ghcr.io/nfdctl/nfdctl:<version>). */
  readonly ref: string
  /** The name and tag the test's overlays give instead, as an operator's registry would. */
  readonly name: string
  readonly tag: string
}

let kubectlBinary: Promise<string> | undefined

/** Runs the kubectl built with the control plane (the version of the cluster) against the node's cluster. */
export async function kubectl(env: NodeEnv, ...args: string[]): Promise<string> {
  kubectlBinary ??= ensureBinaries(() => {}, ['kubectl']).then((dir) => join(dir, 'kubectl'))
  const bin = await kubectlBinary
  try {
    const {stdout} = await run(bin, ['--kubeconfig', env.plane.kubeconfig, ...args], {maxBuffer: 32 * 1024 * 1024})
    return stdout
  } catch (error) {
    const e = error as Error & {stderr?: string}
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr?.trim() || e.message}`, {cause: error})
  }
}

/** Gives the archive's image for this machine's platform to the node's containerd, named as the overlays name it (and under `extraTags`). */
export async function loadImage(env: NodeEnv, image: NodeImage, extraTags: readonly string[] = []): Promise<void> {
  await env.node.containerd.ctr('-n', 'k8s.io', 'images', 'import', '--platform', `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`, image.archive)
  for (const tag of [image.tag, ...extraTags]) {
    const ref = `${image.name}:${tag}`
    await env.node.containerd.ctr('-n', 'k8s.io', 'images', 'rm', ref).catch(() => '')
    await env.node.containerd.ctr('-n', 'k8s.io', 'images', 'tag', image.ref, ref)
  }
}

export interface Overlay {
  /** deploy/<component>, the kustomization an operator applies. */
  readonly component: string
  /** The image the manifests run instead of the shipped name (kustomize's `images:`, as `kustomize edit set image` writes it). */
  readonly image: {readonly name: string; readonly tag: string}
  /** Strategic-merge patches, as an operator whose nodes differ from the defaults writes them. */
  readonly patches?: readonly object[]
  /** JSON patches (RFC 6902), for what a strategic merge cannot change: a flag in a list, a mount's path. */
  readonly jsonPatches?: readonly JsonPatch[]
}

/** An RFC 6902 patch of one object of the base, as kustomize's `patches` with a target take it. */
export interface JsonPatch {
  readonly target: {readonly kind: string; readonly name: string}
  readonly ops: readonly object[]
}

/**
 * A kustomization an operator writes over deploy/<component>: the image they built or pulled, and the
 * patches their nodes need. Written to a fresh directory; returns it (for `kubectl apply -k`).
 */
export async function writeOverlay(overlay: Overlay): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `nfdctl-overlay-${overlay.component.replaceAll('/', '-')}-`))
  await mkdir(dir, {recursive: true})
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    images: [{name: shippedImage, newName: overlay.image.name, newTag: overlay.image.tag}],
    kind: 'Kustomization',
    // JSON patches name list indexes of the base as it renders: they go before the strategic merges.
    patches: [...(overlay.jsonPatches ?? []).map(({ops, target}) => ({patch: stringify(ops), target})), ...(overlay.patches ?? []).map((patch) => ({patch: stringify(patch)}))],
    // kustomize takes bases by relative path only.
    resources: [relative(dir, join(repoRoot, 'deploy', overlay.component))],
  }
  await writeFile(join(dir, 'kustomization.yaml'), stringify(kustomization))
  return dir
}

interface PodList {
  items: Array<{
    metadata: {name: string; uid: string; deletionTimestamp?: string; labels?: Record<string, string>}
    spec: {nodeName?: string}
    status: {phase?: string; conditions?: Array<{type: string; status: string}>; containerStatuses?: Array<{name: string; restartCount: number; containerID?: string; ready: boolean}>}
  }>
}
export type ListedPod = PodList['items'][number]

/** The pods of `namespace` matching `selector` that are not being deleted. */
export async function livePods(env: NodeEnv, namespace: string, selector: string): Promise<ListedPod[]> {
  const pods = await env.client.request<PodList>('GET', `/api/v1/namespaces/${namespace}/pods`, {query: {labelSelector: selector}})
  return pods.items.filter((p) => p.metadata.deletionTimestamp === undefined)
}

export const isReady = (pod: ListedPod): boolean => pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false

/** Waits until `count` pods matching `selector` are Ready (kubelet's readiness probe passed); resolves with them. */
export async function waitForReadyPods(env: NodeEnv, namespace: string, selector: string, count: number, timeoutMs = 120_000): Promise<ListedPod[]> {
  return waitFor(
    `${count} Ready pod(s) ${selector} in ${namespace}`,
    async () => {
      const ready = (await livePods(env, namespace, selector)).filter(isReady)
      return ready.length === count ? ready : undefined
    },
    {intervalMs: 250, timeoutMs},
  )
}

/** containerd's id of a listed pod's container. */
export function containerIdOf(pod: ListedPod, container: string): string {
  const id = pod.status.containerStatuses?.find((c) => c.name === container)?.containerID
  if (id === undefined) throw new Error(`pod ${pod.metadata.name} has no container ${container} running`)
  return id.replace(/^containerd:\/\//, '')
}

/** The peak memory use of a container's memory cgroup (v1 max_usage_in_bytes, v2 memory.peak), found from its task. */
export async function memoryPeak(containerId: string, env: NodeEnv): Promise<number> {
  const containerd = new ContainerdClient({address: env.node.containerd.socket, namespace: 'k8s.io'})
  const task = await containerd.getTask(containerId).finally(() => containerd.close())
  if (task === undefined) throw new Error(`no task for container ${containerId}`)
  const cgroups = await readFile(`/proc/${task.pid}/cgroup`, 'utf8')
  const v1 = /^\d+:memory:(.*)$/m.exec(cgroups)?.[1]
  if (v1 !== undefined) return Number((await readFile(`/sys/fs/cgroup/memory${v1}/memory.max_usage_in_bytes`, 'utf8')).trim())
  const v2 = /^0::(.*)$/m.exec(cgroups)![1]
  return Number((await readFile(`/sys/fs/cgroup${v2}/memory.peak`, 'utf8')).trim())
}

/** Where a node keeps what a standard node keeps at /run/containerd, /var/lib/kubelet/pod-resources, and nfdctl's own directories. */
export interface NodeLayout {
  /** containerd's socket directory. */
  readonly containerdDir: string
  /** kubelet's PodResources socket directory (below its --root-dir). */
  readonly podResourcesDir: string
  /** Holds the agent's state/ and udev/ (udev/ for the plugins too). */
  readonly dir: string
  /** Where containerd reads CDI specs, for an agent whose specs it must read (DRA claims); none for deploy/agent. */
  readonly cdiDir?: string
}

/**
 * The patch an operator writes for a node whose paths differ from the shipped DaemonSet's (k3s keeps
 * containerd under /run/k3s, for one; the test node keeps everything below its own directory). Everything
 * else is the shipped DaemonSet.
 */
export function nodeLayoutPatch(workload: 'nfdctl-agent' | 'nfdctl-plugins', layout: NodeLayout): object {
  const hostPath = (name: string, path: string): object => ({hostPath: {path}, name})
  const udev = hostPath('udev', join(layout.dir, 'udev'))
  const volumes =
    workload === 'nfdctl-agent'
      ? [
          hostPath('containerd', layout.containerdDir),
          hostPath('pod-resources', layout.podResourcesDir),
          hostPath('state', join(layout.dir, 'state')),
          // deploy/agent-dra's alone: deploy/agent mounts no CDI directory.
          ...(layout.cdiDir === undefined ? [] : [hostPath('cdi', layout.cdiDir)]),
          udev,
        ]
      : [udev]
  return {apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: {name: workload}, spec: {template: {spec: {volumes}}}}
}

/** The volumes deploy/agent-dra adds for kubelet's DRA plugin directories, mounted at their host paths. */
const kubeletPluginVolumes = ['plugins-registry', 'dra-plugin']

/**
 * The patch an operator writes over deploy/agent-dra for a kubelet with another --root-dir: --kubelet-dir
 * and kubelet's plugin directories, on the host and in the container alike (kubelet dials the socket path
 * the driver registers, so both must be the same). A strategic merge cannot do it: volume mounts merge by
 * their path, and args are one list. `daemonSet` is the DaemonSet as deploy/agent-dra renders (its list
 * indexes); a `test` before each change fails the apply if the base is no longer what was read.
 */
export function kubeletDirPatch(daemonSet: Manifest, kubeletDir: string): JsonPatch {
  type Mount = {name: string; mountPath: string}
  type Volume = {name: string; hostPath?: {path: string}}
  const pod = (daemonSet as Manifest & {spec: {template: {spec: {containers: Array<{args?: string[]; volumeMounts?: Mount[]}>; volumes?: Volume[]}}}}).spec.template.spec
  const container = '/spec/template/spec/containers/0'
  const args = pod.containers[0].args ?? []
  const flag = args.findIndex((a) => a.startsWith('--kubelet-dir='))
  if (flag < 0) throw new Error(`${daemonSet.metadata.name}: no --kubelet-dir flag to change`)
  const shipped = args[flag].slice('--kubelet-dir='.length)
  const moved = (path: string): string => {
    const below = relative(shipped, path)
    if (below.startsWith('..')) throw new Error(`${daemonSet.metadata.name}: ${path} is not below --kubelet-dir ${shipped}`)
    return join(kubeletDir, below)
  }
  const ops: object[] = [
    {op: 'test', path: `${container}/args/${flag}`, value: args[flag]},
    {op: 'replace', path: `${container}/args/${flag}`, value: `--kubelet-dir=${kubeletDir}`},
  ]
  for (const name of kubeletPluginVolumes) {
    const mount = (pod.containers[0].volumeMounts ?? []).findIndex((m) => m.name === name)
    const volume = (pod.volumes ?? []).findIndex((v) => v.name === name)
    const hostPath = pod.volumes?.[volume]?.hostPath?.path
    if (mount < 0 || hostPath === undefined) throw new Error(`${daemonSet.metadata.name}: no hostPath volume ${name} mounted in its container`)
    ops.push(
      {op: 'test', path: `${container}/volumeMounts/${mount}/name`, value: name},
      {op: 'replace', path: `${container}/volumeMounts/${mount}/mountPath`, value: moved(pod.containers[0].volumeMounts![mount].mountPath)},
      {op: 'test', path: `/spec/template/spec/volumes/${volume}/name`, value: name},
      {op: 'replace', path: `/spec/template/spec/volumes/${volume}/hostPath/path`, value: moved(hostPath)},
    )
  }
  return {ops, target: {kind: 'DaemonSet', name: daemonSet.metadata.name}}
}
