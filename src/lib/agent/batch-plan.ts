import type {DeviceClass} from '../devices/types.js'
import {resourceNameOf} from '../devices/resource-names.js'
import type {PodAllocations} from '../kubelet/pod-resources.js'
import {decideAccess, limitHoldersOf, type PolicyDecision} from './access-policy.js'
import {containerRequests, criLabels, requestKey, requestOfContainer, type ContainerRequest, type NodePod} from './container-access.js'
import {containersToReconcile, specDevices, type ClaimedDevices, type ContainerWork, type OwnedNumberHolder} from './reconcile-plan.js'

/** What a batch reads of a node pod. */
export interface PodAsks {
  readonly uid: string
  readonly phase?: string
  /** It has ResourceClaims: only its containers can hold devices by claim. */
  readonly hasClaims: boolean
  readonly requests: readonly ContainerRequest[]
}

export function podAsks(pod: NodePod): PodAsks {
  return {hasClaims: pod.spec?.hasClaims === true, phase: pod.status?.phase, requests: containerRequests(pod), uid: pod.metadata.uid}
}

export interface BatchWorkInput {
  readonly pods: readonly PodAsks[]
  /** containerd's workload containers and the running tasks' init PIDs. */
  readonly containers: Parameters<typeof containersToReconcile>[0]['containers']
  readonly running: ReadonlyMap<string, number>
  /** Containers that may hold class devices the agent gave; undefined (the first batch) looks at every one. */
  readonly mayHold: ReadonlySet<string> | undefined
  /** The devices a container holds by ResourceClaim (the DRA driver on). */
  readonly claimed?: ClaimedDevices
}

/**
 * The node's pods' container requests, by requestKey, and what a container holds by claim: only a pod with
 * ResourceClaims has its containers' specs read for claims.
 */
function podLookups({claimed, pods}: Pick<BatchWorkInput, 'claimed' | 'pods'>): {requests: Map<string, ContainerRequest>; claimed?: ClaimedDevices} {
  const requests = new Map<string, ContainerRequest>()
  for (const pod of pods) for (const r of pod.requests) requests.set(requestKey(r), r)
  if (claimed === undefined) return {requests}
  const claimPods = new Set(pods.filter((p) => p.hasClaims).map((p) => p.uid))
  return {claimed: (c) => (claimPods.has(c.labels[criLabels.podUid]) ? claimed(c) : undefined), requests}
}

/** Pure: the running containers a batch looks at. */
export function batchWork(input: BatchWorkInput): ContainerWork[] {
  const {claimed, requests} = podLookups(input)
  return containersToReconcile({claimed, containers: input.containers, mayHold: input.mayHold, requests, running: input.running})
}

/**
 * Pure: every listed workload container, running or not, as the owned numbers see it (ownedToKeep): the
 * classes it holds by limit or claim, and its spec's device nodes.
 */
export function ownedNumberHolders(input: Pick<BatchWorkInput, 'claimed' | 'containers' | 'pods'>): OwnedNumberHolder[] {
  const {claimed, requests} = podLookups(input)
  return input.containers
    .filter((c) => c.labels[criLabels.kind] !== 'sandbox')
    .map((c): OwnedNumberHolder => {
      const given = new Set([...(requestOfContainer(c.labels, requests)?.classes ?? [])].filter(([, via]) => via === 'limit').map(([name]) => name))
      for (const name of claimed?.(c)?.keys() ?? []) given.add(name)
      return {given, nodes: () => specDevices(undefined, c.spec?.linux?.devices).nodes.keys()}
    })
}

/** Pure: whether a container of the batch asks by limit for one of the node's classes (only then are kubelet's allocations read). */
export function needsAllocations(work: readonly ContainerWork[], classes: ReadonlyMap<string, DeviceClass>): boolean {
  return work.some((w) => [...w.request.classes].some(([name, via]) => via === 'limit' && classes.has(name)))
}

export interface BatchPlanInput {
  readonly nodeName: string
  readonly classes: ReadonlyMap<string, DeviceClass>
  readonly pods: readonly PodAsks[]
  readonly work: readonly ContainerWork[]
  /** kubelet's allocations; undefined when PodResources did not answer. */
  readonly allocations: PodAllocations | undefined
  /** The annotation grants the last batch admitted (holderKey). */
  readonly holders: ReadonlySet<string>
  readonly namespaceLabels: (name: string) => Readonly<Record<string, string>> | undefined
}

/** One container of the batch with the request the policy admitted. */
export interface PlannedContainer {
  readonly work: ContainerWork
  /**
   * The stable IDs it is allocated per class (by limit: kubelet's; by claim: the claim's). Undefined when a
   * limit's allocation cannot be told (PodResources away, or a name two pods share for now): the container is
   * left as it is, and its units stay counted meanwhile.
   */
  readonly allocated?: ReadonlyMap<string, readonly string[]>
}

export interface BatchPlan {
  readonly decision: PolicyDecision
  readonly containers: readonly PlannedContainer[]
  /** The containers that may hold class devices after the batch (those whose apply fails or still holds some are added then). */
  readonly mayHold: ReadonlySet<string>
  /** How many of the batch's containers hold each class (the status's count). */
  readonly holding: ReadonlyMap<string, number>
}

/** Pure: who may hold what in this batch, and with which allocated devices. */
export function planBatch(input: BatchPlanInput): BatchPlan {
  const {allocations, classes} = input
  const allocatedIds = (r: ContainerRequest, name: string): string[] | undefined => allocations?.devicesOf({name: r.pod, namespace: r.namespace}, r.container, resourceNameOf(name))
  const decision = decideAccess({
    classes,
    holders: input.holders,
    limitAllocated: (r, name) => (allocatedIds(r, name)?.length ?? 1) > 0,
    limitHolders: limitHoldersOf(input.pods),
    namespaceLabels: input.namespaceLabels,
    nodeName: input.nodeName,
    requests: input.work.map((w) => w.request).filter((r) => r.classes.size > 0 || r.annotationProblem !== undefined),
  })
  const holding = new Map<string, number>()
  const containers = input.work.map((w): PlannedContainer => {
    const request = decision.admitted.get(requestKey(w.request)) ?? w.request
    const work = {...w, request}
    for (const name of request.classes.keys()) holding.set(name, (holding.get(name) ?? 0) + 1)
    const untold = [...request.classes].some(([name, via]) => via === 'limit' && classes.has(name) && allocatedIds(request, name) === undefined)
    if (untold) return {work}
    return {allocated: new Map([...request.classes].map(([name, via]) => [name, via === 'claim' ? (w.claimed?.get(name) ?? []) : (allocatedIds(request, name) ?? [])])), work}
  })
  const mayHold = new Set(containers.filter((c) => c.work.request.classes.size > 0).map((c) => c.work.container.id))
  return {containers, decision, holding, mayHold}
}
