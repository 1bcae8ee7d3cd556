/**
 * Who may hold a DeviceClass (devices.nfdctl.io) on this node. Pure: requests, classes and namespace labels
 * in; per container the classes it may hold and, for the rest, why not.
 *
 * A resource limit is kubelet's business: kubelet admitted the pod against the device plugin's units (and
 * ResourceQuota can cap the limit per namespace), so the agent honours it once kubelet's PodResources shows
 * the allocation (a pod bound by hand while the plugin was away is admitted without one). A pod annotation is a request
 * any pod author can write, in any namespace, at any time (updates included), so it is refused unless the
 * class opts in with spec.annotationAccess and its namespaceSelector selects the pod's namespace; it never
 * reaches a class with allocation Device (each device is a unit kubelet gives one container), and it takes
 * a slot of the class's capacity only where one is left after the limit holders.
 */
import {matchesLabelSelector} from '../devices/label-selector.js'
import type {DeviceClass} from '../devices/types.js'
import {draClassName, podAnnotationOf, resourceNameOf} from '../devices/resource-names.js'
import {requestKey, type ContainerRequest, type RequestedVia} from './container-access.js'

/** Why a request for a class is refused; the label of nfdctl_agent_requests_refused_total. */
export type RefusalReason =
  | 'annotation-access-off'
  | 'namespace-not-admitted'
  | 'allocation-device'
  | 'allocation-dra'
  | 'capacity'
  | 'unknown-class'
  | 'bad-annotation'
  | 'not-allocated'
  /** The namespace is not in the agent's cache yet: refused without a word, the next batch decides. */
  | 'namespace-pending'

export interface Refusal {
  readonly class: string
  readonly reason: RefusalReason
  /** One line for the pod's Event and the log: what was refused and what to change. */
  readonly message: string
}

export interface PolicyInput {
  readonly nodeName: string
  /** The requests of the running containers on this node. */
  readonly requests: readonly ContainerRequest[]
  /**
   * Per class, the containers of this node's pods that ask for it by limit, running or not yet (limitHolders):
   * kubelet gave each a unit, so annotations get only what is left.
   */
  readonly limitHolders: ReadonlyMap<string, number>
  /** Whether kubelet's PodResources lists an allocation of the class's resource for the container. */
  readonly limitAllocated: (request: ContainerRequest, className: string) => boolean
  /** The classes that apply to this node, by name. */
  readonly classes: ReadonlyMap<string, DeviceClass>
  /** A namespace's labels; undefined when the namespace is not known (yet). */
  readonly namespaceLabels: (namespace: string) => Readonly<Record<string, string>> | undefined
  /**
   * The annotation grants admitted by the last decision (holderKey): a holder keeps its slot of a class's
   * capacity ahead of newer requests, so that one pod's edit never takes a device from another.
   */
  readonly holders: ReadonlySet<string>
}

export interface PolicyDecision {
  /** Per request key, the request with only the classes it may hold. */
  readonly admitted: ReadonlyMap<string, ContainerRequest>
  /** Per request key, the classes it may not hold and why. */
  readonly refused: ReadonlyMap<string, readonly Refusal[]>
  /** The annotation grants admitted now (holderKey), for the next decision. */
  readonly holders: ReadonlySet<string>
}

/** One container's annotation grant of one class. */
export const holderKey = (request: ContainerRequest, className: string): string => `${requestKey(request)}/${className}`

export function decideAccess(input: PolicyInput): PolicyDecision {
  const refused = new Map<string, Refusal[]>()
  const refuse = (request: ContainerRequest, refusal: Refusal): void => {
    const list = refused.get(requestKey(request))
    if (list === undefined) refused.set(requestKey(request), [refusal])
    else list.push(refusal)
  }
  const allowed = new Map<string, Map<string, RequestedVia>>()
  const allow = (request: ContainerRequest, name: string, via: RequestedVia): void => {
    const classes = allowed.get(requestKey(request)) ?? new Map<string, RequestedVia>()
    classes.set(name, via)
    allowed.set(requestKey(request), classes)
  }

  // One decision per container, however many runtime containers carry its pod UID and name.
  const requests = [...new Map(input.requests.map((r) => [requestKey(r), r])).values()]
  const candidates = new Map<string, ContainerRequest[]>()
  for (const request of requests) {
    if (request.annotationProblem !== undefined) refuse(request, {class: '-', message: request.annotationProblem, reason: 'bad-annotation'})
    for (const [name, via] of request.classes) {
      const deviceClass = input.classes.get(name)
      // The scheduler allocated the claim and kubelet had it prepared for this pod: DRA's rules decided.
      if (via === 'claim') {
        allow(request, name, via)
        continue
      }
      if (via === 'limit') {
        // An unknown class by limit gives nothing (wantedAccess) and needs no word: kubelet would not have
        // admitted the pod without the resource.
        if (deviceClass === undefined || input.limitAllocated(request, name)) allow(request, name, via)
        else {
          refuse(request, {
            class: name,
            reason: 'not-allocated',
            message:
              `kubelet allocated no ${resourceNameOf(name)} to container ${request.container} (was the class's device plugin registered when the pod started?); `
              + 'delete the pod so that it is admitted again',
          })
        }
        continue
      }
      const refusal = annotationRefusal(request, name, deviceClass, input)
      if (refusal !== undefined) refuse(request, refusal)
      else if (candidates.has(name)) candidates.get(name)!.push(request)
      else candidates.set(name, [request])
    }
  }

  const holders = new Set<string>()
  for (const [name, requests] of candidates) {
    const capacity = input.classes.get(name)!.spec.capacity
    let free = capacity - (input.limitHolders.get(name) ?? 0)
    for (const request of requests.sort(capacityOrder(name, input.holders))) {
      if (free <= 0) {
        refuse(request, {
          class: name,
          reason: 'capacity',
          message:
            `DeviceClass (devices.nfdctl.io) ${name} is held by ${capacity} container(s) on node ${input.nodeName}, its capacity; `
            + 'container '
            + request.container
            + " gets it when one of them stops, or ask the class's owner to raise spec.capacity",
        })
        continue
      }
      free--
      allow(request, name, 'annotation')
      holders.add(holderKey(request, name))
    }
  }

  const admitted = new Map<string, ContainerRequest>()
  for (const request of requests) admitted.set(requestKey(request), {...request, classes: allowed.get(requestKey(request)) ?? new Map()})
  return {admitted, holders, refused}
}

function annotationRefusal(request: ContainerRequest, name: string, deviceClass: DeviceClass | undefined, input: PolicyInput): Refusal | undefined {
  const limit = resourceNameOf(name)
  const annotation = podAnnotationOf(request.container)
  if (deviceClass === undefined) {
    return {
      class: name,
      reason: 'unknown-class',
      message:
        `the annotation ${annotation} names ${name}, but no DeviceClass (devices.nfdctl.io) of that name applies to node ${input.nodeName}; `
        + 'check the name with kubectl get deviceclasses.devices.nfdctl.io',
    }
  }
  if (deviceClass.spec.allocation === 'Device') {
    return {
      class: name,
      reason: 'allocation-device',
      message:
        `DeviceClass (devices.nfdctl.io) ${name} has allocation Device, whose devices kubelet gives one container each, so the annotation ${annotation} `
        + `cannot take them; ask with the resource limit ${limit}: 1`,
    }
  }
  if (deviceClass.spec.allocation === 'DRA') {
    return {
      class: name,
      reason: 'allocation-dra',
      message:
        `DeviceClass (devices.nfdctl.io) ${name} has allocation DRA, whose devices are allocated by ResourceClaim, so the annotation ${annotation} `
        + `cannot take them; ask with a ResourceClaim of the resource.k8s.io DeviceClass ${draClassName(name)}`,
    }
  }
  const policy = deviceClass.spec.annotationAccess
  if (policy === undefined) {
    return {
      class: name,
      reason: 'annotation-access-off',
      message:
        `DeviceClass (devices.nfdctl.io) ${name} does not admit the annotation ${annotation} (it has no spec.annotationAccess); `
        + `ask with the resource limit ${limit}: 1, or have the class's owner set spec.annotationAccess`,
    }
  }
  const labels = input.namespaceLabels(request.namespace)
  if (labels === undefined) return {class: name, message: `namespace ${request.namespace} is not known yet`, reason: 'namespace-pending'}
  if (!matchesLabelSelector(policy.namespaceSelector, labels)) {
    return {
      class: name,
      reason: 'namespace-not-admitted',
      message:
        `namespace ${request.namespace} is not selected by spec.annotationAccess.namespaceSelector of DeviceClass (devices.nfdctl.io) ${name}, `
        + `so the annotation ${annotation} is refused; ask with the resource limit ${limit}: 1, or have the class's owner admit the namespace`,
    }
  }
  return undefined
}

/** Per class, the containers that ask for it by limit, of pods not yet ended (Succeeded or Failed pods hold nothing). */
export function limitHoldersOf(pods: Iterable<{readonly phase?: string; readonly requests: readonly ContainerRequest[]}>): Map<string, number> {
  const holders = new Map<string, number>()
  for (const pod of pods) {
    if (pod.phase === 'Succeeded' || pod.phase === 'Failed') continue
    for (const request of pod.requests) {
      for (const [name, via] of request.classes) if (via === 'limit') holders.set(name, (holders.get(name) ?? 0) + 1)
    }
  }
  return holders
}

/** Holders first, then older pods, then by key: a stable order, so a slot does not move between batches. */
function capacityOrder(name: string, holders: ReadonlySet<string>): (a: ContainerRequest, b: ContainerRequest) => number {
  return (a, b) => {
    const held = Number(holders.has(holderKey(b, name))) - Number(holders.has(holderKey(a, name)))
    if (held !== 0) return held
    const age = (a.createdAt ?? '').localeCompare(b.createdAt ?? '')
    return age !== 0 ? age : requestKey(a).localeCompare(requestKey(b))
  }
}
