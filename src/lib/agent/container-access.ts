import {dnsSubdomainPattern} from '../devices/label-selector.js'
import type {Device, DeviceClass} from '../devices/types.js'
import {toMeta, type ObjectCodec} from '../kube/metadata-list.js'
import type {ObjectMeta} from '../kube/resource.js'
import {stableDeviceId} from '../devices/device-identity.js'
import {resourceDomain} from '../devices/resource-names.js'
import type {DeviceRule} from '../runtime/device-cgroup.js'

/**
 * How a container asked for a class: a resource limit (kubelet allocated it), the pod annotation, or a
 * ResourceClaim the DRA driver prepared (the devices are the claim's).
 */
export type RequestedVia = 'limit' | 'annotation' | 'claim'

/** One container of a pod on this node and the classes it asked for. */
export interface ContainerRequest {
  readonly namespace: string
  readonly pod: string
  /** The pod's UID: a pod re-created under the same name is another pod, and never inherits the old one's access. */
  readonly podUid: string
  /** The pod's creationTimestamp (RFC 3339, so ordered as text): older pods come first for a class's capacity. */
  readonly createdAt?: string
  readonly container: string
  readonly classes: ReadonlyMap<string, RequestedVia>
  /** What was wrong with the container's annotation (names dropped), when anything was. */
  readonly annotationProblem?: string
}

/** What the agent keeps of a Pod: its identity, annotations and containers' limits (a node's pods, not their status). */
export interface PodLike {
  readonly metadata: {
    readonly namespace?: string
    readonly name: string
    readonly uid?: string
    readonly creationTimestamp?: string
    readonly annotations?: Readonly<Record<string, string>>
  }
  readonly status?: {readonly phase?: string}
  readonly spec?: {
    readonly containers?: ReadonlyArray<{readonly name: string; readonly resources?: {readonly limits?: Readonly<Record<string, string>>}}>
    /**
     * Whether the pod has ResourceClaims (its own, or the one the scheduler made for its limits of a DRA
     * class): only its containers can hold devices by claim.
     */
    readonly hasClaims?: boolean
  }
}

/** A pod as the agent's informer keeps it. */
export type NodePod = PodLike & {readonly metadata: ObjectMeta & PodLike['metadata']}

/** The pod informer's codec: whole objects, trimmed to NodePod. */
export const podCodec: ObjectCodec<NodePod> = {
  listAccept: 'application/json',
  metaOf: (pod) => pod.metadata,
  toItem: (raw) => {
    const pod = raw as {
      metadata?: ObjectMeta & {annotations?: Record<string, string>; creationTimestamp?: string}
      spec?: PodLike['spec'] & {resourceClaims?: unknown[]}
      status?: {phase?: string; extendedResourceClaimStatus?: {resourceClaimName?: string}}
    }
    if (pod.metadata === undefined) return undefined
    return {
      metadata: {...toMeta(pod.metadata), annotations: pod.metadata.annotations, creationTimestamp: pod.metadata.creationTimestamp},
      spec: {
        containers: pod.spec?.containers?.map((c) => ({name: c.name, resources: {limits: c.resources?.limits}})),
        hasClaims: (pod.spec?.resourceClaims?.length ?? 0) > 0 || pod.status?.extendedResourceClaimStatus?.resourceClaimName !== undefined,
      },
      status: {phase: pod.status?.phase},
    }
  },
  watchAccept: 'application/json',
}

/**
 * The class requests of a pod's containers: limits `devices.nfdctl.io/<class>` and the annotation
 * `devices.nfdctl.io/<container-name>: class-a,class-b`. A limit wins over the annotation for the same class
 * (it carries kubelet's allocation). Containers that ask for nothing are left out. Whether an annotation is
 * honoured is the class's access policy (access-policy.ts), not decided here.
 */
export function containerRequests(pod: PodLike): ContainerRequest[] {
  const prefix = `${resourceDomain}/`
  const requests: ContainerRequest[] = []
  for (const container of pod.spec?.containers ?? []) {
    const classes = new Map<string, RequestedVia>()
    const annotation = `${prefix}${container.name}`
    const annotated = pod.metadata.annotations?.[annotation]
    const {names, problem} = annotatedClasses(annotation, annotated)
    for (const name of names) classes.set(name, 'annotation')
    for (const [resource, quantity] of Object.entries(container.resources?.limits ?? {})) {
      if (resource.startsWith(prefix) && quantity !== '0') classes.set(resource.slice(prefix.length), 'limit')
    }
    if (classes.size === 0 && problem === undefined) continue
    requests.push({
      annotationProblem: problem,
      classes,
      container: container.name,
      createdAt: pod.metadata.creationTimestamp,
      namespace: pod.metadata.namespace ?? 'default',
      pod: pod.metadata.name,
      podUid: pod.metadata.uid ?? '',
    })
  }
  return requests
}

/** Names read from one annotation at most: a class list is short, and each name costs a decision per batch. */
const maxAnnotatedClasses = 16
// A DeviceClass name: a DNS-1123 subdomain of at most 63 characters (the resource name's second part).
const isClassName = (name: string): boolean => name.length <= 63 && dnsSubdomainPattern.test(name)

/**
 * The class names of one annotation value: split at commas, blanks and tabs trimmed (only those: the
 * admission policy's CEL trim() and JavaScript's differ on other white space), only names a class can have,
 * the first maxAnnotatedClasses of them. Anything dropped is named in the problem.
 */
function annotatedClasses(annotation: string, value: string | undefined): {names: string[]; problem?: string} {
  if (value === undefined) return {names: []}
  const parts = value
    .split(',')
    .map((c) => c.replace(/^[ \t]+|[ \t]+$/g, ''))
    .filter((c) => c !== '')
  const invalid = parts.filter((c) => !isClassName(c))
  const valid = [...new Set(parts.filter(isClassName))]
  const problems = [
    ...(invalid.length > 0 ? [`${invalid.length} name(s) that no DeviceClass can have (such as ${JSON.stringify(invalid[0].slice(0, 70))})`] : []),
    ...(valid.length > maxAnnotatedClasses ? [`${valid.length} class names, of which only the first ${maxAnnotatedClasses} are read`] : []),
  ]
  return {
    names: valid.slice(0, maxAnnotatedClasses),
    problem: problems.length === 0 ? undefined : `the annotation ${annotation} has ${problems.join(' and ')}; list DeviceClass names, comma-separated`,
  }
}

/** The CRI labels containerd's kubelet-made containers carry. */
export const criLabels = {
  container: 'io.kubernetes.container.name',
  kind: 'io.cri-containerd.kind',
  namespace: 'io.kubernetes.pod.namespace',
  pod: 'io.kubernetes.pod.name',
  podUid: 'io.kubernetes.pod.uid',
} as const

/** containerd's filter for the workload containers of pods (no sandboxes). */
export const workloadContainers = `labels."${criLabels.kind}"==container`

/** A request's key, and the key a container's CRI labels give: the pod's UID and the container's name. */
export const requestKey = (r: Pick<ContainerRequest, 'container' | 'podUid'>): string => `${r.podUid}/${r.container}`

/**
 * The request a runtime container belongs to, by pod UID and container name: a container of a deleted pod
 * whose successor has the same namespace and name (a StatefulSet pod re-created) matches nothing. A
 * container without the UID label is not a pod's.
 */
export function requestOfContainer(labels: Readonly<Record<string, string>>, requests: ReadonlyMap<string, ContainerRequest>): ContainerRequest | undefined {
  const uid = labels[criLabels.podUid]
  const container = labels[criLabels.container]
  if (uid === undefined || uid === '' || container === undefined) return undefined
  return requests.get(requestKey({container, podUid: uid}))
}

/** A device a container may use, with the access its classes give. */
export interface DeviceAccess {
  readonly device: Device
  /** Subset of r, w, m, in that order. */
  readonly access: string
}

export interface WantedAccessInput {
  readonly request: ContainerRequest
  readonly classes: ReadonlyMap<string, DeviceClass>
  /** The devices of each class present now. */
  readonly members: ReadonlyMap<string, readonly Device[]>
  /**
   * Device allocation: the stable IDs of the devices given to this container, per class: kubelet's (from
   * PodResources) by limit, the prepared claims' with allocation DRA.
   */
  readonly allocated: ReadonlyMap<string, readonly string[]>
}

/**
 * The devices a container should have now, by device id (b7:0): every device present in a Class-allocation
 * class it holds; for Device allocation requested by limit, only the devices kubelet allocated to it (by
 * stable ID); for DRA allocation, only its claims' devices (by stable ID, so a device plugged in again under
 * another kernel name is its again); by annotation (which the class's access policy admitted: only allocation
 * Class), every device of the class. A device in two classes gets the union of their permissions. Unknown
 * classes give nothing.
 */
export function wantedAccess(input: WantedAccessInput): Map<string, DeviceAccess> {
  const wanted = new Map<string, DeviceAccess>()
  for (const [name, via] of input.request.classes) {
    const deviceClass = input.classes.get(name)
    if (deviceClass === undefined) continue
    const allocated = new Set(input.allocated.get(name) ?? [])
    for (const device of input.members.get(name) ?? []) {
      // Never another container's device: with allocation Device only kubelet's answer counts, with DRA only
      // the claim's, however asked.
      const allocatedVia = {Class: undefined, DRA: 'claim', Device: 'limit'}[deviceClass.spec.allocation]
      if (via === 'claim' && allocatedVia !== 'claim') continue
      if (allocatedVia !== undefined && (via !== allocatedVia || !allocated.has(stableDeviceId(device, deviceClass.spec.identity)))) continue
      const before = wanted.get(device.id)?.access ?? ''
      wanted.set(device.id, {access: unionAccess(before, deviceClass.spec.permissions), device})
    }
  }
  return wanted
}

const unionAccess = (a: string, b: string): string => ['r', 'w', 'm'].filter((c) => a.includes(c) || b.includes(c)).join('')

export const ruleOf = (access: DeviceAccess): DeviceRule => ({access: access.access, major: access.device.major, minor: access.device.minor, type: access.device.type === 'block' ? 'b' : 'c'})

export interface AccessChange {
  readonly grant: DeviceAccess[]
  readonly revoke: DeviceAccess[]
}

/**
 * What to change so that a container has exactly the wanted class devices: `current` is what it has of the
 * class devices now (from its cgroup), `base` the devices its runtime spec already allows (standard devices,
 * kubelet's DeviceSpecs) — those are never revoked. A device whose access changed is revoked and granted again:
 * apply the revokes first. `partial`: devices whose controls disagree (a hybrid host's v1 rule and v2 program,
 * one written and the other not when the agent was killed); `current` holds what either allows, and a wanted
 * one is revoked and granted again, so that both say the same.
 */
export function diffAccess(
  current: ReadonlyMap<string, DeviceAccess>,
  wanted: ReadonlyMap<string, DeviceAccess>,
  base: ReadonlySet<string> = new Set(),
  partial: ReadonlySet<string> = new Set(),
): AccessChange {
  const grant: DeviceAccess[] = []
  const revoke: DeviceAccess[] = []
  for (const [id, have] of current) {
    const want = wanted.get(id)
    if (base.has(id)) continue
    if (want === undefined || want.access !== have.access || partial.has(id)) revoke.push(have)
  }
  for (const [id, want] of wanted) {
    const have = current.get(id)
    if (have === undefined || have.access !== want.access || (partial.has(id) && !base.has(id))) grant.push(want)
  }
  return {grant, revoke}
}
