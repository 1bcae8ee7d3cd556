import pLimit from 'p-limit'

import type {ClassMembers} from '../devices/class-members.js'
import type {ClassView} from '../devices/class-view.js'
import {noneDropped, type DroppedFeatures} from '../devices/dropped-features.js'
import {ownedId, type OwnedDevices} from '../devices/owned-devices.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import type {PodResources} from '../kubelet/device-plugin-api.js'
import {podAllocations, type KnownPod, type PodAllocations} from '../kubelet/pod-resources.js'
import type {AgentMetrics} from './agent-metrics.js'
import {batchWork, needsAllocations, ownedNumberHolders, planBatch, podAsks, type BatchPlan, type PodAsks} from './batch-plan.js'
import type {ListedContainers} from './change-sources.js'
import {criLabels, type NodePod} from './container-access.js'
import type {BatchOutcome} from './grant-health.js'
import type {ContainerReconciler, NodeView} from './container-reconciler.js'
import {ownedToKeep, type ClaimedDevices, type ContainerWork} from './reconcile-plan.js'
import type {RefusalNotices} from './refusal-notices.js'
import type {StatusReporter} from './status-reporter.js'

export interface NodeReconcilerOptions {
  readonly nodeName: string
  /** The workload containers and running tasks (ChangeSources.containers); undefined while containerd is away. */
  readonly containers: () => Promise<ListedContainers | undefined>
  /** kubelet's allocations (its PodResources API); read only in a batch with a container that asks by limit. */
  readonly podResources: () => Promise<PodResources[]>
  /** Containers changed at the same time. */
  readonly workers: number
  /** The node's classes now, valid and invalid. */
  readonly classes: () => ClassView
  readonly members: Pick<ClassMembers, 'all' | 'generation' | 'known' | 'refusals'>
  /** The node's owned device numbers: looked up for each container, forgotten once nothing holds them. */
  readonly owned: Pick<OwnedDevices, 'all' | 'forget' | 'generation' | 'get'>
  /** The node's pods now (the informer's cache). */
  readonly pods: () => Iterable<NodePod>
  /** A namespace's labels; undefined when it is not known (yet). */
  readonly namespaceLabels: (name: string) => Readonly<Record<string, string>> | undefined
  /** Applies one container's plan (a ContainerReconciler). */
  readonly reconciler: Pick<ContainerReconciler, 'reconcile' | 'retain'>
  /** The devices containers hold by ResourceClaim (the DRA driver's prepared claims); none without it. */
  readonly claimed?: ClaimedDevices
  /** What the API server drops of what the DRA driver writes; nothing without it. */
  readonly dropped?: () => DroppedFeatures
  /** Why the node's runtime would not hand claims' devices to containers (the DRA driver's runtimeProblem()). */
  readonly runtimeProblem?: () => string | undefined
  readonly notices: Pick<RefusalNotices, 'tell' | 'tellDevices' | 'tellDropped' | 'tellRuntime'>
  readonly status: Pick<StatusReporter, 'report'>
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** How the batch's containers fared (those changed or checked; the ones whose allocation is unknown are not counted). */
  readonly outcome?: (outcome: BatchOutcome) => void
}

/** What a batch read before deciding anything. */
interface Gathered {
  readonly view: ClassView
  readonly classes: ReadonlyMap<string, ClassView['applicable'][number]>
  readonly pods: readonly PodAsks[]
  readonly listed: ListedContainers
  readonly work: readonly ContainerWork[]
  readonly allocations: PodAllocations | undefined
}

/** The newest batch plan, and what it was made from. */
interface LastPlan {
  readonly plan: BatchPlan
  readonly classes: Gathered['classes']
  readonly listed: ListedContainers
  /** The count of admission changes when its pods and classes were read. */
  readonly admission: number
}

/**
 * One batch across the node, in three steps: gather (the classes, pods, containerd's containers, kubelet's
 * allocations), plan (pure: batch-plan.ts, who may hold what), apply (each container through the
 * ContainerReconciler, up to --workers at once) and report (refusals, the classes' status). The access
 * policy needs what the last batch admitted, so that state lives here between batches.
 *
 * The device lane (applyDevices) gives a class device event to the containers it changes without waiting
 * for the batch queue: a batch's gather waits for containerd's container list, which takes tens of
 * milliseconds while pods start. It applies the newest batch plan with the members as they are now, and
 * only while nothing that decides who may hold what (a pod, a namespace, a class, a claim) has changed
 * since that plan read them; the event's own batch follows and checks every container again.
 */
export class NodeReconciler {
  /** Changes that can decide who may hold what (admissionChanged), counted. */
  #admission = 0
  #last: LastPlan | undefined
  /** The annotation grants the access policy admitted in the last batch (holderKey). */
  #annotationHolders: ReadonlySet<string> = new Set()
  /**
   * Containers that may hold class devices the agent gave: reconciled even when they no longer ask. Undefined
   * until the first batch, which looks at every container: one that stopped asking while the agent was away
   * is found there.
   */
  #mayHold: Set<string> | undefined

  constructor(readonly options: NodeReconcilerOptions) {}

  /** Something that can decide who may hold what changed (a pod, a namespace, a class, a claim): the device lane waits for a plan made after it. */
  admissionChanged(): void {
    this.#admission++
  }

  async reconcile(): Promise<void> {
    const {logger, nodeName, notices, reconciler} = this.options
    const started = performance.now()
    // Counted before gather reads the pods and classes (at once): a change after it makes the plan too old for the lane.
    const admission = this.#admission
    const gathered = await this.#gather()
    // containerd away: what runs is not known; its reconnect starts a batch.
    if (gathered === undefined) return
    const listedAt = performance.now()
    const {allocations, classes, listed, pods, work} = gathered
    if (allocations !== undefined && allocations.ambiguous.length > 0) {
      logger.info({pods: allocations.ambiguous}, "kubelet's PodResources cannot tell these pods from another of the same name yet; their containers that ask by resource limit stay as they are")
    }
    const plan = planBatch({allocations, classes, holders: this.#annotationHolders, namespaceLabels: this.options.namespaceLabels, nodeName, pods, work})
    notices.tell(
      work.map((w) => w.request),
      plan.decision,
      this.#annotationHolders,
      new Set(pods.map((p) => p.uid)),
    )
    this.#annotationHolders = plan.decision.holders
    const mayHold = new Set(plan.mayHold)
    this.#mayHold = mayHold
    this.#last = {admission, classes, listed, plan}
    await reconciler.retain(new Set(listed.containers.map((c) => c.id)))
    const decidedAt = performance.now()
    const node = this.#nodeView(classes, listed)
    const outcome = await this.#apply(plan.containers, node, mayHold)
    this.options.outcome?.(outcome)
    this.#forgetOwned(gathered, node.members)
    this.#report(gathered, plan, node.members)
    // Where a batch's time goes, for an operator who finds hot-plugs slow.
    const ms = (from: number, to: number): number => Math.round((to - from) * 10) / 10
    logger.debug({containers: plan.containers.length, decideMs: ms(listedAt, decidedAt), listMs: ms(started, listedAt), reconcileMs: ms(decidedAt, performance.now())}, 'batch done')
  }

  /**
   * The device lane: the containers of the newest plan that ask for one of `classes` (whose members just
   * changed) are brought to that plan with the members as they are now, ahead of the batch queue. Nothing is
   * done (the batch does it) before the first plan, or when something that decides who may hold what changed
   * since the newest plan read it; a container whose process is not the one planned is left to the batch.
   * Resolves with how many containers it looked at.
   */
  async applyDevices(classes: ReadonlySet<string>): Promise<number> {
    const last = this.#last
    if (last === undefined || last.admission !== this.#admission) return 0
    const {listed} = last
    const changed = [...classes]
    const touched = last.plan.containers.filter(
      ({allocated, work}) => allocated !== undefined && listed.running.get(work.container.id) === work.pid && changed.some((name) => work.request.classes.has(name)),
    )
    if (touched.length === 0) return 0
    const started = performance.now()
    const outcome = await this.#apply(touched, this.#nodeView(last.classes, listed), this.#mayHold ?? new Set())
    this.options.logger.debug({containers: touched.length, failed: outcome.failed, ms: Math.round((performance.now() - started) * 10) / 10}, 'device lane done')
    return touched.length
  }

  /** The classes and members as a batch (or the lane) gives them to each container: the members read now. */
  #nodeView(classes: Gathered['classes'], listed: ListedContainers): NodeView {
    const {members} = this.options
    const {owned} = this.options
    return {
      classes,
      generation: members.generation,
      known: (id) => members.known(id),
      members: members.all(),
      owned: (id) => owned.get(id),
      ownedGeneration: owned.generation,
      touchedAt: listed.touchedAt,
    }
  }

  /** Owned numbers no class has a device at and no listed container holds as the agent's are forgotten (ownedToKeep). */
  #forgetOwned({listed, pods}: Gathered, members: NodeView['members']): void {
    const {claimed, logger, owned} = this.options
    const keep = ownedToKeep(owned.all(), members, () => ownedNumberHolders({claimed, containers: listed.containers, pods}))
    const forgotten = owned.all().filter((o) => !keep.has(ownedId(o)))
    if (forgotten.length === 0) return
    logger.info({devices: forgotten.map((o) => `${o.devNode} (${ownedId(o)})`)}, 'device numbers forgotten: no class has a device there and no container holds them')
    void owned
      .forget((o) => keep.has(ownedId(o)))
      .catch((error: unknown) => {
        this.options.metrics.errors.inc({kind: 'state'})
        logger.warn({err: errorMessage(error)}, "cannot write the record of the node's class device numbers; it is written again with the next change")
      })
  }

  /** The batch's input: undefined while containerd is away. */
  async #gather(): Promise<Gathered | undefined> {
    const view = this.options.classes()
    const classes = new Map(view.applicable.map((c) => [c.metadata.name, c]))
    const pods = [...this.options.pods()].map(podAsks)
    let listed: ListedContainers | undefined
    try {
      listed = await this.options.containers()
    } catch (error) {
      this.options.metrics.errors.inc({kind: 'containerd'})
      throw new Error(`cannot list containerd's containers: ${errorMessage(error)}`, {cause: error})
    }
    if (listed === undefined) return undefined
    const {containers, running} = listed
    const work = batchWork({claimed: this.options.claimed, containers, mayHold: this.#mayHold, pods, running})
    const listedAllocations = needsAllocations(work, classes) ? await this.#podResources() : []
    const allocations = listedAllocations && podAllocations(listedAllocations, knownPods(this.options.pods(), containers, running))
    return {allocations, classes, listed, pods, view, work}
  }

  /** Each planned container brought to its plan, up to --workers at once; a failure is counted and the container looked at again next batch. */
  async #apply(containers: BatchPlan['containers'], node: NodeView, mayHold: Set<string>): Promise<BatchOutcome> {
    const {logger, reconciler} = this.options
    const limit = pLimit(Math.max(1, this.options.workers))
    const outcome: {succeeded: number; failed: number; lastError?: string} = {failed: 0, succeeded: 0}
    await Promise.all(
      containers.map(({allocated, work}) =>
        limit(async () => {
          if (allocated === undefined) return
          const {container, request} = work
          try {
            // Still holding class devices (a revoke that failed): looked at again in the next batch.
            if (await reconciler.reconcile(work, node, allocated)) mayHold.add(container.id)
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
    return outcome
  }

  /** Devices refused by their classes, what the API server drops and the runtime's problem told once, and the node's entry of each class's status. */
  #report({classes, view}: Gathered, plan: BatchPlan, members: NodeView['members']): void {
    const refused = this.options.members.refusals()
    const dropped = this.options.dropped?.() ?? noneDropped
    this.options.notices.tellDevices(refused, classes)
    const runtimeProblem = this.options.runtimeProblem?.()
    this.options.notices.tellDropped(dropped, classes)
    this.options.notices.tellRuntime(runtimeProblem, classes)
    this.options.status.report({classes, dropped, holding: plan.holding, invalid: view.invalid, members, refused, runtimeProblem})
  }

  /** kubelet's allocations; undefined when it does not answer (containers asking by limit keep their access meanwhile). */
  async #podResources(): Promise<PodResources[] | undefined> {
    return this.options.podResources().catch((error: unknown) => {
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
