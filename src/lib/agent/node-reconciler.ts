import pLimit from 'p-limit'

import type {ClassMembers} from '../devices/class-members.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {resourceNameOf} from '../devices/resource-names.js'
import type {PodResources} from '../kubelet/device-plugin-api.js'
import {listPodResources, podAllocations, type KnownPod} from '../kubelet/pod-resources.js'
import {decideAccess, limitHoldersOf} from './access-policy.js'
import type {AgentMetrics} from './agent-metrics.js'
import type {ListedContainers} from './change-sources.js'
import type {ClassView} from './class-store.js'
import {containerRequests, criLabels, requestKey, type ContainerRequest, type NodePod} from './container-access.js'
import type {ContainerReconciler} from './container-reconciler.js'
import {containersToReconcile, type ClaimedDevices} from './reconcile-plan.js'
import type {RefusalNotices} from './refusal-notices.js'
import type {StatusReporter} from './status-reporter.js'

export interface NodeReconcilerOptions {
  readonly nodeName: string
  /** The workload containers and running tasks (ChangeSources.containers); undefined while containerd is away. */
  readonly containers: () => Promise<ListedContainers | undefined>
  readonly podResourcesSocket: string
  /** Containers changed at the same time. */
  readonly workers: number
  /** The node's classes now, valid and invalid. */
  readonly classes: () => ClassView
  readonly members: ClassMembers
  /** The node's pods now (the informer's cache). */
  readonly pods: () => Iterable<NodePod>
  /** A namespace's labels; undefined when it is not known (yet). */
  readonly namespaceLabels: (name: string) => Readonly<Record<string, string>> | undefined
  readonly reconciler: ContainerReconciler
  /** The devices containers hold by ResourceClaim (the DRA driver's prepared claims); none without it. */
  readonly claimed?: ClaimedDevices
  readonly notices: RefusalNotices
  readonly status: StatusReporter
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** How the batch's containers fared (those changed or checked; the ones whose allocation is unknown are not counted). */
  readonly outcome?: (outcome: {succeeded: number; failed: number; lastError?: string}) => void
}

/**
 * One batch across the node: every running container of a pod that asks for classes (and every one that may
 * still hold some) gets exactly the access the policy admits, then the node reports. The access policy
 * needs what the last batch admitted, so that state lives here between batches.
 */
export class NodeReconciler {
  /** The annotation grants the access policy admitted in the last batch (holderKey). */
  #annotationHolders: ReadonlySet<string> = new Set()
  /**
   * Containers that may hold class devices the agent gave: reconciled even when they no longer ask. Undefined
   * until the first batch, which looks at every container: one that stopped asking while the agent was away
   * is found there.
   */
  #mayHold: Set<string> | undefined

  constructor(readonly options: NodeReconcilerOptions) {}

  async reconcile(): Promise<void> {
    const {logger, members, metrics, nodeName, reconciler} = this.options
    const started = performance.now()
    const view = this.options.classes()
    const classes = new Map(view.applicable.map((c) => [c.metadata.name, c]))
    const pods = [...this.options.pods()].map((pod) => ({hasClaims: pod.spec?.hasClaims === true, phase: pod.status?.phase, requests: containerRequests(pod), uid: pod.metadata.uid}))
    const requests = new Map<string, ContainerRequest>()
    for (const pod of pods) for (const r of pod.requests) requests.set(requestKey(r), r)
    let listed: ListedContainers | undefined
    try {
      listed = await this.options.containers()
    } catch (error) {
      metrics.errors.inc({kind: 'containerd'})
      throw new Error(`cannot list containerd's containers: ${errorMessage(error)}`, {cause: error})
    }
    // containerd away: what runs is not known; its reconnect starts a batch.
    if (listed === undefined) return
    const {containers, running, touchedAt} = listed
    const listedAt = performance.now()
    // Only a pod with ResourceClaims can hold devices by claim: no other container's spec is read for it.
    const {claimed} = this.options
    const claimPods = claimed === undefined ? undefined : new Set(pods.filter((p) => p.hasClaims).map((p) => p.uid))
    const work = containersToReconcile({
      claimed: claimed === undefined ? undefined : (c) => (claimPods?.has(c.labels[criLabels.podUid]) ? claimed(c) : undefined),
      containers,
      mayHold: this.#mayHold,
      requests,
      running,
    })
    // A class asked for by limit: whether kubelet allocated it (and with allocation Device, which devices) is PodResources'.
    const byLimit = (r: ContainerRequest): boolean => [...r.classes].some(([name, via]) => via === 'limit' && classes.has(name))
    const listedAllocations = work.some((w) => byLimit(w.request)) ? await this.#podResources() : []
    const allocations = listedAllocations && podAllocations(listedAllocations, knownPods(this.options.pods(), containers, running))
    if (allocations !== undefined && allocations.ambiguous.length > 0) {
      logger.info({pods: allocations.ambiguous}, "kubelet's PodResources cannot tell these pods from another of the same name yet; their containers that ask by resource limit stay as they are")
    }
    // A limit whose allocation cannot be told (PodResources away, or a name two pods share for now): the
    // container is skipped below, and its units stay counted meanwhile.
    const allocatedIds = (r: ContainerRequest, name: string): string[] | undefined => allocations?.devicesOf({name: r.pod, namespace: r.namespace}, r.container, resourceNameOf(name))
    const decision = decideAccess({
      classes,
      holders: this.#annotationHolders,
      limitAllocated: (r, name) => (allocatedIds(r, name)?.length ?? 1) > 0,
      limitHolders: limitHoldersOf(pods),
      namespaceLabels: this.options.namespaceLabels,
      nodeName,
      requests: work.map((w) => w.request).filter((r) => r.classes.size > 0 || r.annotationProblem !== undefined),
    })
    this.options.notices.tell(
      work.map((w) => w.request),
      decision,
      this.#annotationHolders,
      new Set(pods.map((p) => p.uid)),
    )
    this.#annotationHolders = decision.holders
    const admitted = work.map((w) => ({...w, request: decision.admitted.get(requestKey(w.request)) ?? w.request}))
    const mayHold = new Set(admitted.filter((w) => w.request.classes.size > 0).map((w) => w.container.id))
    this.#mayHold = mayHold
    await reconciler.retain(new Set(containers.map((c) => c.id)))
    const decidedAt = performance.now()
    const holding = new Map<string, number>()
    const node = {classes, knownCount: members.knownCount, touchedAt, known: (id: string) => members.known(id), members: members.all()}
    const limit = pLimit(Math.max(1, this.options.workers))
    const outcome: {succeeded: number; failed: number; lastError?: string} = {failed: 0, succeeded: 0}
    await Promise.all(
      admitted.map((w) =>
        limit(async () => {
          const {container, request} = w
          for (const name of request.classes.keys()) holding.set(name, (holding.get(name) ?? 0) + 1)
          const untold = [...request.classes].some(([name, via]) => via === 'limit' && classes.has(name) && allocatedIds(request, name) === undefined)
          if (untold) return
          const allocated = new Map([...request.classes].map(([name, via]) => [name, via === 'claim' ? (w.claimed?.get(name) ?? []) : (allocatedIds(request, name) ?? [])]))
          try {
            // Still holding class devices (a revoke that failed): looked at again in the next batch.
            if (await reconciler.reconcile(w, node, allocated)) mayHold.add(container.id)
            outcome.succeeded++
          } catch (error) {
            outcome.failed++
            outcome.lastError = errorMessage(error)
            mayHold.add(container.id)
            logger.warn({container: container.id, err: errorMessage(error), pod: `${request.namespace}/${request.pod}`}, "could not update a container's devices")
          }
        }),
      ),
    )
    this.options.outcome?.(outcome)
    const refused = members.refusals()
    this.options.notices.tellDevices(refused, classes)
    this.options.status.report({classes, holding, invalid: view.invalid, members: node.members, refused})
    // Where a batch's time goes, for an operator who finds hot-plugs slow.
    const ms = (from: number, to: number): number => Math.round((to - from) * 10) / 10
    logger.debug({containers: admitted.length, decideMs: ms(listedAt, decidedAt), listMs: ms(started, listedAt), reconcileMs: ms(decidedAt, performance.now())}, 'batch done')
  }

  /** kubelet's allocations; undefined when it does not answer (containers asking by limit keep their access meanwhile). */
  async #podResources(): Promise<PodResources[] | undefined> {
    return listPodResources(this.options.podResourcesSocket).catch((error: unknown) => {
      this.options.metrics.errors.inc({kind: 'pod-resources'})
      this.options.logger.warn({err: errorMessage(error)}, "cannot read kubelet's PodResources; containers that ask by resource limit keep their access for now")
      return undefined
    })
  }
}

/** The pods the node knows of: the informer's, and those of containers that run (an old pod's may outlive its object). */
function knownPods(pods: Iterable<NodePod>, containers: ListedContainers['containers'], running: ListedContainers['running']): KnownPod[] {
  const known: KnownPod[] = [...pods].map((p) => ({name: p.metadata.name, namespace: p.metadata.namespace ?? '', uid: p.metadata.uid}))
  for (const c of containers) {
    const {[criLabels.namespace]: namespace, [criLabels.pod]: name, [criLabels.podUid]: uid} = c.labels
    if (running.has(c.id) && namespace !== undefined && name !== undefined && uid !== undefined) known.push({name, namespace, uid})
  }
  return known
}
