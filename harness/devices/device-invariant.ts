import {lstat, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {matchesLabelSelector} from '../../src/lib/devices/label-selector.js'
import type {LabelSelector} from '../../src/lib/devices/types.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {PodResources} from '../../src/lib/kubelet/device-plugin-api.js'
import {listPodResources} from '../../src/lib/kubelet/pod-resources.js'
import {ContainerdClient} from '../../src/lib/runtime/containerd-client.js'
import {deviceControlOf, formatRule, readDeviceRules, type DeviceControl, type DeviceRule} from '../../src/lib/runtime/device-cgroup.js'
import {decodeInstructions, deviceAccess, deviceType, type Instruction} from '../../src/lib/runtime/device-program.js'
import {closeFd, openCgroup, programFdById, programInfo, queryDevicePrograms} from '../../src/lib/sys/bpf.js'
import type {TestNode} from '../node/node.js'
import {runDeviceProgram} from './bpf-interpreter.js'

// The invariant the agent promises after any fault: every container's device rules and /dev hold exactly what
// its classes, claims and runtime allow (the runtime's own devices, as its OCI spec lists them, still open and
// still in its /dev). Read from the kernel's side (devices.list, the attached programs run through
// an interpreter, the nodes under /proc/<pid>/root/dev) and from the sources of entitlement (the pods, the
// DeviceClasses, kubelet's PodResources, the ResourceClaims), never from the agent's own record or status.

export interface DeviceNumber {
  readonly type: 'b' | 'c'
  readonly major: number
  readonly minor: number
}

/** A device plugged in now, as the test that plugged it knows it (not as the agent reports it). */
export interface PresentDevice extends DeviceNumber {
  readonly devNode: string
  /** The ID kubelet's device plugin API knows it by (PodResources). */
  readonly stableId: string
  /** Its device name in the node's ResourceSlice (what a claim's allocation names). */
  readonly draName: string
  /** The DeviceClasses it is in. */
  readonly classes: readonly string[]
  /** What the test calls it, for the report. */
  readonly label: string
}

export interface InvariantInput {
  readonly client: KubeClient
  readonly node: TestNode
  readonly present: readonly PresentDevice[]
  /**
   * Every device number to look for in every container: class devices present now or seen during the run, and
   * every number the test plugged anything in at. A rule or node for one of them is judged; others are not.
   */
  readonly watched: readonly DeviceNumber[]
}

/** One finding: which container, which device, and the sentence that says what is wrong. */
export interface Finding {
  /** namespace/pod/container. */
  readonly container: string
  /** `b 7:601`. */
  readonly device: string
  readonly text: string
}

export interface InvariantReport {
  /** Running workload containers looked at. */
  readonly containers: number
  /** A device a container may open (r or w) or has an allow rule for, beyond what it is entitled to. */
  readonly stray: Finding[]
  /**
   * A device a container is entitled to that it may not open, or whose node is not in its /dev: by its
   * classes and claims, or by its runtime (its spec's rules no device node accounts for: /dev/null, zero, tty...).
   */
  readonly missing: Finding[]
  /** A device node in a container's /dev for a watched number it is not entitled to (harmless when denied). */
  readonly staleNodes: Finding[]
}

export const numberText = (n: DeviceNumber): string => `${n.type} ${n.major}:${n.minor}`
const numberKey = numberText

interface ClassObject {
  metadata: {name: string}
  spec: {allocation?: 'Class' | 'Device' | 'DRA'; permissions?: string; capacity?: number; annotationAccess?: {namespaceSelector?: LabelSelector}}
}
interface PodObject {
  metadata: {namespace: string; name: string; uid: string; annotations?: Record<string, string>}
  spec: {
    containers: Array<{name: string; resources?: {limits?: Record<string, string>; claims?: Array<{name: string; request?: string}>}}>
    resourceClaims?: Array<{name: string}>
  }
  status?: {phase?: string; resourceClaimStatuses?: Array<{name: string; resourceClaimName?: string}>}
}
interface ClaimObject {
  metadata: {namespace: string; name: string}
  status?: {allocation?: {devices?: {results?: Array<{request: string; driver: string; pool: string; device: string}>}}}
}

const domain = 'devices.nfdctl.io'
/** Only opening counts: runc lets every container mknod any device (`c *:* m`, `b *:* m`), by design. */
const openAccess = (access: string): string => ['r', 'w'].filter((c) => access.includes(c)).join('')
const beyond = (have: string, allowed: string): string => [...have].filter((c) => !allowed.includes(c)).join('')

/** Why a container may have a device: the classes (and how it asked) and the access they give. */
interface Entitlement {
  access: string
  via: string[]
}

/** Checks every running workload container of the node once. Throws when the input cannot be judged (capacity contention). */
export async function checkDeviceInvariant(input: InvariantInput): Promise<InvariantReport> {
  const {client, node} = input
  const [pods, classes, namespaces, podResources] = await Promise.all([
    client.request<{items: PodObject[]}>('GET', '/api/v1/pods', {query: {fieldSelector: `spec.nodeName=${node.name}`}}).then((l) => l.items),
    client.request<{items: ClassObject[]}>('GET', `/apis/${domain}/v1alpha1/deviceclasses`).then((l) => new Map(l.items.map((c) => [c.metadata.name, c]))),
    client
      .request<{items: Array<{metadata: {name: string; labels?: Record<string, string>}}>}>('GET', '/api/v1/namespaces')
      .then((l) => new Map(l.items.map((n) => [n.metadata.name, n.metadata.labels ?? {}]))),
    listPodResources(node.kubelet.podResourcesSocket),
  ])
  const claims = await claimsOf(client, pods)
  const podsByUid = new Map(pods.map((p) => [p.metadata.uid, p]))
  const presentAt = new Map(input.present.map((d) => [numberKey(d), d]))

  /** What a container of a pod may have, by device number. */
  const entitlementOf = (pod: PodObject | undefined, containerName: string): Map<string, Entitlement> => {
    const entitled = new Map<string, Entitlement>()
    const container = pod?.spec.containers.find((c) => c.name === containerName)
    if (pod === undefined || container === undefined) return entitled
    const give = (device: PresentDevice, cls: ClassObject, via: string): void => {
      const e = entitled.get(numberKey(device)) ?? {access: '', via: []}
      e.access = openAccess(e.access + (cls.spec.permissions ?? 'rw'))
      e.via.push(`${cls.metadata.name} by ${via}`)
      entitled.set(numberKey(device), e)
    }
    const annotated = (pod.metadata.annotations?.[`${domain}/${containerName}`] ?? '').split(',').map((s) => s.trim())
    for (const [name, cls] of classes) {
      const members = input.present.filter((d) => d.classes.includes(name))
      const limit = container.resources?.limits?.[`${domain}/${name}`]
      const byLimit = limit !== undefined && limit !== '0'
      const allocation = cls.spec.allocation ?? 'Class'
      if (allocation === 'Class') {
        const admitted = cls.spec.annotationAccess !== undefined && matchesLabelSelector(cls.spec.annotationAccess.namespaceSelector ?? {}, namespaces.get(pod.metadata.namespace) ?? {})
        const via = byLimit ? 'limit' : annotated.includes(name) && admitted ? 'annotation' : undefined
        if (via !== undefined) for (const d of members) give(d, cls, via)
      } else if (allocation === 'Device' && byLimit) {
        const ids = new Set(kubeletAllocated(podResources, pod, containerName, `${domain}/${name}`))
        for (const d of members) if (ids.has(d.stableId)) give(d, cls, `limit (kubelet allocated ${d.stableId})`)
      } else if (allocation === 'DRA') {
        for (const ref of container.resources?.claims ?? []) {
          const claimName = pod.status?.resourceClaimStatuses?.find((s) => s.name === ref.name)?.resourceClaimName
          const claim = claimName === undefined ? undefined : claims.get(`${pod.metadata.namespace}/${claimName}`)
          const results = (claim?.status?.allocation?.devices?.results ?? []).filter((r) => r.driver === domain && r.pool === node.name && (ref.request === undefined || r.request === ref.request))
          for (const d of members) if (results.some((r) => r.device === d.draName)) give(d, cls, `claim ${claimName}`)
        }
      }
    }
    return entitled
  }
  checkCapacity(classes, pods)

  const containerd = new ContainerdClient({address: node.containerd.socket, namespace: 'k8s.io'})
  const report = {containers: 0, missing: [] as Finding[], staleNodes: [] as Finding[], stray: [] as Finding[]}
  try {
    const [containers, tasks] = await Promise.all([containerd.listContainers(), containerd.listTasks()])
    const running = new Map(tasks.filter((t) => t.status === 'RUNNING').map((t) => [t.containerId, t.pid]))
    for (const container of containers) {
      const pid = running.get(container.id)
      if (pid === undefined || container.labels['io.cri-containerd.kind'] === 'sandbox') continue
      const l = container.labels
      const name = `${l['io.kubernetes.pod.namespace']}/${l['io.kubernetes.pod.name']}/${l['io.kubernetes.container.name']}`
      const pod = podsByUid.get(l['io.kubernetes.pod.uid'] ?? '')
      const seen = await seenBy(pid).catch(async (error: Error) => {
        // A container that ended while it was read is no longer one to judge.
        if ((await containerd.getTask(container.id))?.status !== 'RUNNING') return undefined
        throw new Error(`${name}: ${error.message}`, {cause: error})
      })
      if (seen === undefined) continue
      report.containers++
      const runtime = runtimeDevices(container.spec)
      judge(report, name, entitlementOf(pod, l['io.kubernetes.container.name'] ?? ''), seen, input.watched, presentAt, runtime)
      judgeRuntime(report, name, seen, runtime)
    }
  } finally {
    containerd.close()
  }
  return report
}

/**
 * The device IDs of one resource kubelet gave a container, from PodResources, which names pods by namespace
 * and name only: a name listed twice (a pod re-created while the old one is still there) cannot be judged.
 */
function kubeletAllocated(listed: readonly PodResources[], pod: PodObject, container: string, resourceName: string): string[] {
  const entries = listed.filter((p) => p.namespace === pod.metadata.namespace && p.name === pod.metadata.name)
  if (entries.length > 1) throw new Error(`kubelet lists pod ${pod.metadata.namespace}/${pod.metadata.name} twice: whose devices are whose cannot be told; do not re-create a pod under a name in use`)
  const found = entries[0]?.containers.find((c) => c.name === container)
  return found?.devices.filter((d) => d.resource_name === resourceName).flatMap((d) => d.device_ids) ?? []
}

/** The claims the node's pods name, by namespace/name. */
async function claimsOf(client: KubeClient, pods: readonly PodObject[]): Promise<Map<string, ClaimObject>> {
  const namespaces = new Set(pods.filter((p) => (p.spec.resourceClaims?.length ?? 0) > 0).map((p) => p.metadata.namespace))
  const lists = await Promise.all([...namespaces].map((ns) => client.request<{items: ClaimObject[]}>('GET', `/apis/resource.k8s.io/v1/namespaces/${ns}/resourceclaims`).then((l) => l.items)))
  return new Map(lists.flat().map((c) => [`${c.metadata.namespace}/${c.metadata.name}`, c]))
}

/**
 * A Class-allocation class held by more containers than its capacity: which of them the policy admits
 * depends on order and history this checker does not model, so the run must keep within capacity.
 */
function checkCapacity(classes: ReadonlyMap<string, ClassObject>, pods: readonly PodObject[]): void {
  for (const [name, cls] of classes) {
    if ((cls.spec.allocation ?? 'Class') !== 'Class') continue
    const live = pods.filter((p) => p.status?.phase !== 'Failed' && p.status?.phase !== 'Succeeded')
    const holders = live.flatMap((p) =>
      p.spec.containers.filter((c) => c.resources?.limits?.[`${domain}/${name}`] !== undefined || (p.metadata.annotations?.[`${domain}/${c.name}`] ?? '').split(',').some((s) => s.trim() === name)),
    )
    if (holders.length > (cls.spec.capacity ?? 1)) {
      throw new Error(
        `class ${name} is asked for by ${holders.length} containers, over its capacity ${cls.spec.capacity ?? 1}: the invariant checker does not model who wins; keep the run within capacity`,
      )
    }
  }
}

/** What the kernel lets one container do, and the nodes in its /dev. */
interface Seen {
  /** Each layer that restricts devices: the v1 devices cgroup, the v2 device programs. */
  readonly layers: Layer[]
  /** Block and character nodes under its /dev, by path inside the container. */
  readonly nodes: Map<string, DeviceNumber>
}

interface Layer {
  readonly name: string
  /** r and w, as far as this layer allows them. */
  access(n: DeviceNumber): string
  /** What in this layer allows the device (for the report). */
  explain(n: DeviceNumber): string
}

/**
 * What a container's init process may open of a device (r, w), read again on each call: every layer must
 * allow. For timing how long a container keeps a number, without the pods and claims a full check reads.
 */
export async function openAccessReader(pid: number): Promise<(n: DeviceNumber) => Promise<string>> {
  const control = await controlOf(pid)
  return async (n) => effectiveAccess(await layersOf(control), n)
}

async function seenBy(pid: number): Promise<Seen> {
  return {layers: await layersOf(await controlOf(pid)), nodes: await deviceNodes(join('/proc', String(pid), 'root', 'dev'), '/dev')}
}

const controlOf = (pid: number): Promise<DeviceControl> => deviceControlOf(pid, {mode: 'v2'}).catch(() => deviceControlOf(pid, {mode: 'v1'}))

/** Every layer that decides a device's access, as the kernel has it now. */
const layersOf = async (control: DeviceControl): Promise<Layer[]> => [...(await v1Layer(control)), ...v2Layers(control)]

/** What a process may open of a device (r, w): what every layer allows. */
const effectiveAccess = (layers: readonly Layer[], n: DeviceNumber): string => ['r', 'w'].filter((c) => layers.every((layer) => layer.access(n).includes(c))).join('')

/** The v1 devices cgroup, unless it allows everything (`a *:* rwm`: a privileged container, or no restriction). */
async function v1Layer(control: DeviceControl): Promise<Layer[]> {
  const dir = control.mode === 'v1' ? control.dir : control.v1Dir
  if (dir === undefined) return []
  const rules = await readDeviceRules(dir)
  if (rules.some((r) => r.type === 'a' && r.major === '*' && r.minor === '*' && openAccess(r.access) === 'rw')) return []
  const matching = (n: DeviceNumber): DeviceRule[] => rules.filter((r) => (r.type === 'a' || r.type === n.type) && (r.major === '*' || r.major === n.major) && (r.minor === '*' || r.minor === n.minor))
  return [
    {
      access: (n) =>
        openAccess(
          matching(n)
            .map((r) => r.access)
            .join(''),
        ),
      explain: (n) => `v1 devices.list: ${matching(n).map(formatRule).join(', ') || 'no rule'}`,
      name: 'v1',
    },
  ]
}

/**
 * The device programs attached to the container's cgroup v2 directory, each run as the kernel would (all must
 * allow: BPF_F_ALLOW_MULTI). No program: cgroup v2 does not restrict (on a hybrid host v1 decides).
 * Programs of its ancestor cgroups are not read (the runtime's and the node's business, none on the test node).
 */
function v2Layers(control: DeviceControl): Layer[] {
  if (control.mode !== 'v2') return []
  const cgroup = openCgroup(control.dir)
  const programs: Array<{id: number; name: string; instructions: Instruction[]}> = []
  try {
    for (const id of queryDevicePrograms(cgroup)) {
      const fd = programFdById(id)
      try {
        const info = programInfo(fd)
        programs.push({id, instructions: decodeInstructions(info.instructions), name: info.name})
      } finally {
        closeFd(fd)
      }
    }
  } finally {
    closeFd(cgroup)
  }
  return programs.map((p) => {
    const access = (n: DeviceNumber): string =>
      (['r', 'w'] as const).filter((c) => runDeviceProgram(p.instructions, {access: deviceAccess[c], major: n.major, minor: n.minor, type: deviceType[n.type]}) !== 0).join('')
    return {access, explain: (n) => `v2 device program ${p.name || '(unnamed)'} id ${p.id} allows ${access(n) || 'nothing'}`, name: `v2 program ${p.id}`}
  })
}

const skippedDevDirs = new Set(['pts', 'shm', 'mqueue', 'hugepages'])

/** Block and character device nodes below `dir` (symbolic links not followed), by their path in the container. */
async function deviceNodes(dir: string, inside: string, depth = 0): Promise<Map<string, DeviceNumber>> {
  const nodes = new Map<string, DeviceNumber>()
  for (const entry of await readdir(dir, {withFileTypes: true})) {
    const path = join(dir, entry.name)
    if (entry.isDirectory() && depth < 6 && !skippedDevDirs.has(entry.name)) {
      for (const [p, n] of await deviceNodes(path, join(inside, entry.name), depth + 1)) nodes.set(p, n)
    } else if (entry.isBlockDevice() || entry.isCharacterDevice()) {
      const stat = await lstat(path).catch(() => undefined)
      if (stat !== undefined) nodes.set(join(inside, entry.name), {...decodeRdev(stat.rdev), type: entry.isBlockDevice() ? 'b' : 'c'})
    }
  }
  return nodes
}

/** glibc's dev_t: major in bits 8-19 and 32-43, minor in bits 0-7 and 20-31 and 44-63. */
function decodeRdev(rdev: number): {major: number; minor: number} {
  const low = rdev % 2 ** 32
  const high = Math.floor(rdev / 2 ** 32)
  return {major: ((low >>> 8) & 0xfff) | ((high & 0xfffff000) >>> 0), minor: (low & 0xff) | ((low >>> 12) & 0xfff00)}
}

type Spec = Awaited<ReturnType<ContainerdClient['listContainers']>>[number]['spec']

/**
 * The devices a container's runtime gives by itself, by number, with the access they give: the devices the
 * OCI runtime spec has every runtime supply (runc allows them whatever the spec says; /dev/console only to a
 * container with a terminal, so not here), and an allow rule of `linux.resources.devices` at a number no node of
 * `linux.devices` has (kubelet's DeviceSpecs and CDI's device nodes each bring a node with their rule).
 */
function runtimeDevices(spec: Spec): Map<string, {n: DeviceNumber; access: string}> {
  const devices = new Map<string, {n: DeviceNumber; access: string}>(
    [
      [1, 3],
      [1, 5],
      [1, 7],
      [1, 8],
      [1, 9],
      [5, 0],
      [5, 2],
    ].map(([major, minor]) => {
      const n: DeviceNumber = {major, minor, type: 'c'}
      return [numberKey(n), {access: 'rw', n}]
    }),
  )
  const nodes = new Set((spec?.linux?.devices ?? []).map((d) => `${d.type} ${d.major}:${d.minor}`))
  for (const r of spec?.linux?.resources?.devices ?? []) {
    if (!r.allow || (r.type !== 'b' && r.type !== 'c') || r.major === undefined || r.major < 0 || r.minor === undefined || r.minor < 0) continue
    const n: DeviceNumber = {major: r.major, minor: r.minor, type: r.type as 'b' | 'c'}
    if (!nodes.has(numberKey(n))) devices.set(numberKey(n), {access: openAccess((devices.get(numberKey(n))?.access ?? '') + (r.access ?? 'rwm')), n})
  }
  return devices
}

/** The nodes runc makes in every container's /dev itself. */
const runcNodes: ReadonlyMap<string, string> = new Map([
  ['c 1:3', '/dev/null'],
  ['c 1:5', '/dev/zero'],
  ['c 1:7', '/dev/full'],
  ['c 1:8', '/dev/random'],
  ['c 1:9', '/dev/urandom'],
  ['c 5:0', '/dev/tty'],
])

/** The runtime's devices still open as its spec allows them, and runc's nodes of them still in /dev. */
function judgeRuntime(report: InvariantReport, name: string, seen: Seen, runtime: ReadonlyMap<string, {n: DeviceNumber; access: string}>): void {
  for (const [key, {access, n}] of runtime) {
    const effective = effectiveAccess(seen.layers, n)
    const path = runcNodes.get(key)
    const node = path === undefined ? undefined : seen.nodes.get(path)
    const problems = [
      ...(beyond(access, effective) === '' ? [] : [`${beyond(access, effective)} not allowed (${seen.layers.map((l) => l.explain(n)).join('; ')})`]),
      ...(path === undefined || (node !== undefined && numberKey(node) === key) ? [] : [node === undefined ? `no ${path} in its /dev` : `its ${path} is ${numberText(node)}`]),
    ]
    if (problems.length > 0) report.missing.push({container: name, device: key, text: `${name}: ${key} is its runtime's but ${problems.join(', ')}`})
  }
}

function judge(
  report: InvariantReport,
  name: string,
  entitled: ReadonlyMap<string, Entitlement>,
  seen: Seen,
  watched: readonly DeviceNumber[],
  presentAt: ReadonlyMap<string, PresentDevice>,
  runtime: ReadonlyMap<string, {access: string}>,
): void {
  const describe = (n: DeviceNumber): string => {
    const d = presentAt.get(numberKey(n))
    return d === undefined
      ? `nothing of a class is plugged in at ${numberText(n)}`
      : `${numberText(n)} is ${d.label} (${d.devNode}) ${d.classes.length === 0 ? 'in no class' : `of ${d.classes.join(', ')}`}`
  }
  for (const n of uniqueNumbers(watched)) {
    const key = numberKey(n)
    const want = entitled.get(key)
    // The runtime's own: judged by judgeRuntime.
    if (want === undefined && runtime.has(key)) continue
    const effective = effectiveAccess(seen.layers, n)
    const extra = seen.layers.flatMap((layer) => {
      const more = beyond(layer.access(n), want?.access ?? '')
      return more === '' ? [] : [`${layer.explain(n)}`]
    })
    if (seen.layers.length === 0 && beyond('rw', want?.access ?? '') !== '') extra.push('no layer restricts devices at all')
    if (extra.length > 0) {
      report.stray.push({
        container: name,
        device: key,
        text: `${name}: ${key} may be opened or has an allow rule (${extra.join('; ')}) but is not its own (${want === undefined ? 'entitled to nothing there' : `entitled to ${want.access} only`}): ${describe(n)}`,
      })
    }
    if (want !== undefined) {
      const device = presentAt.get(key)!
      const lacking = beyond(want.access, effective)
      const node = seen.nodes.get(device.devNode)
      const problems = [
        ...(lacking === '' ? [] : [`${lacking} not allowed (${seen.layers.map((l) => l.explain(n)).join('; ')})`]),
        ...(node === undefined ? [`no ${device.devNode} in its /dev`] : numberKey(node) === key ? [] : [`its ${device.devNode} is ${numberText(node)}`]),
      ]
      if (problems.length > 0) report.missing.push({container: name, device: key, text: `${name}: ${key} (${device.label}, ${want.via.join(' and ')}) is its own but ${problems.join(', ')}`})
    }
  }
  const watchedKeys = new Set(watched.map(numberKey))
  for (const [path, n] of seen.nodes) {
    if (watchedKeys.has(numberKey(n)) && !entitled.has(numberKey(n)) && !runtime.has(numberKey(n))) {
      report.staleNodes.push({container: name, device: numberKey(n), text: `${name}: ${path} (${numberText(n)}) in its /dev, not its own: ${describe(n)}`})
    }
  }
}

function uniqueNumbers(numbers: readonly DeviceNumber[]): DeviceNumber[] {
  return [...new Map(numbers.map((n) => [numberKey(n), n])).values()]
}
