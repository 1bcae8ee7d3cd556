import {AbortedError, SafetyStopError, errorMessage} from '../errors.js'
import type {KubeClient} from '../kube/kube-client.js'
import {readCluster, type ClusterRead, type ReadEvent, type ReadOptions} from './cluster-reader.js'
import {deleteStale, type DeleteResult} from './deleter.js'
import {staleWithExistingNode} from './live-nodes.js'
import type {SweepOptions} from './sweep-options.js'
import type {GcKind} from './kinds.js'
import {planSweep, type ObservedObject, type PlanOptions, type StaleObject, type SweepPlan} from './sweep-planner.js'
import type {KindSummary, ObjectResult, StaleObjectReport, SweepReport} from './sweep-report.js'

export type SweepEvent = ReadEvent | {type: 'planned'; stale: number; refused?: string} | {type: 'deleting'; done: number; failed: number; total: number}

export interface SweepHooks {
  readonly onEvent?: (event: SweepEvent) => void
  /** Test seam for real-server races: runs after each listed page. */
  readonly afterPage?: (what: string, page: number) => Promise<void>
  /** Test seam for real-server races: runs after planning, before the stale set's Nodes are checked again. */
  readonly afterPlan?: (stale: readonly StaleObject[]) => Promise<void>
  /** Test seam for real-server races: runs after that check, before the first delete. */
  readonly beforeDelete?: (doomed: readonly StaleObject[]) => Promise<void>
}

/** One garbage-collection pass: read, plan, and (unless refused or --dry-run) delete. */
export async function sweepOnce(client: KubeClient, options: SweepOptions, hooks: SweepHooks = {}, signal?: AbortSignal): Promise<SweepReport> {
  const started = performance.now()
  const requestsBefore = client.stats.requests
  const throttledBefore = client.window.throttled
  const read = await readAndPlan(client, {afterPage: hooks.afterPage, kinds: options.kinds, listSize: options.listSize, onEvent: hooks.onEvent, signal}, options)
  const {plan} = read
  const refused = plan.action === 'refuse' ? plan.reason : undefined
  hooks.onEvent?.({refused, stale: plan.stale.length, type: 'planned'})

  let results: DeleteResult[] = []
  let nodesBack: ReadonlySet<StaleObject> = new Set()
  if (plan.action === 'delete' && !options.dryRun && plan.stale.length > 0) {
    await hooks.afterPlan?.(plan.stale)
    // A long sweep's node list can be minutes old by now, and a node that registered again under its name
    // since then has objects that did not change (so their delete preconditions hold): ask the API server
    // once more, as gc run does. No answer throws, and nothing is deleted.
    nodesBack = await staleOfExistingNodes(client, plan.stale, options.listSize, signal)
    const doomed = plan.stale.filter((s) => !nodesBack.has(s))
    await hooks.beforeDelete?.(doomed)
    results = await deleteStale(client, doomed, {
      concurrency: options.concurrency,
      keepUnlabelled: options.keepUnlabelled,
      listSize: options.listSize,
      onProgress: (p) => hooks.onEvent?.({...p, type: 'deleting'}),
      signal,
    })
  }

  // Key order is the order --json and -o yaml print.
  const kinds: KindSummary[] = options.kinds.map((k) => ({
    kind: k.kind,
    scanned: read.scanned.get(k) ?? 0,
    stale: 0,
    deleted: 0,
    changed: 0,
    failed: 0,
    skipped: read.skipped.get(k),
  }))
  const summaryOf = (kind: string): KindSummary => kinds.find((k) => k.kind === kind)!
  const outcomeOf = new Map(results.map((r) => [r.object, r]))
  const objects = plan.stale.map((object): StaleObjectReport => {
    const summary = summaryOf(object.kind.kind)
    summary.stale++
    const result = outcomeOf.get(object)
    const outcome: ObjectResult = refused !== undefined ? 'kept' : options.dryRun ? 'would-delete' : nodesBack.has(object) ? 'node-exists' : (result?.outcome ?? 'failed')
    if (outcome === 'deleted') summary.deleted++
    if (outcome === 'changed' || outcome === 'replaced' || outcome === 'node-exists') summary.changed++
    if (outcome === 'failed') summary.failed++
    return reportOf(object, outcome, refused === undefined && !options.dryRun, result?.error)
  })
  return {
    dryRun: options.dryRun,
    refused,
    nodes: read.nodes,
    kinds,
    objects,
    durationMs: Math.round(performance.now() - started),
    apiRequests: client.stats.requests - requestsBefore,
    apiThrottled: client.window.throttled - throttledBefore,
    concurrency: {final: client.window.limit, highest: client.window.highest, lowest: client.window.lowest},
  }
}

/** The stale objects whose Node exists by the API server's answer right now. */
async function staleOfExistingNodes(client: KubeClient, stale: readonly StaleObject[], pageSize: number, signal?: AbortSignal): Promise<Set<StaleObject>> {
  try {
    return await staleWithExistingNode(client, stale, pageSize, signal)
  } catch (error) {
    if (error instanceof AbortedError) throw error
    throw new SafetyStopError(`cannot check the stale objects' Nodes again before deleting; nothing deleted: ${errorMessage(error)}`, {cause: error})
  }
}

/** What a sweep keeps of its read: the plan, the counts, and where each kind's objects live. */
export interface PlannedRead {
  readonly plan: SweepPlan
  readonly nodes: number
  readonly objects: number
  readonly scanned: ClusterRead['scanned']
  readonly skipped: ClusterRead['skipped']
  /** The namespaces each namespaced kind's objects were seen in (gc run looks objects up by name there). */
  readonly namespaces: ReadonlyMap<GcKind, ReadonlySet<string>>
}

/**
 * Reads the cluster and plans. Only the plan and the counts leave this function, so the 14,000 listed
 * objects and 5,000 node names of a large cluster are garbage before the first delete, not live until the
 * report is written.
 */
export async function readAndPlan(client: KubeClient, read: ReadOptions, plan: PlanOptions): Promise<PlannedRead> {
  const {scanned, skipped, view} = await readCluster(client, read)
  return {namespaces: namespacesByKind(view.objects), nodes: view.nodes.size, objects: view.objects.length, plan: planSweep(view, plan), scanned, skipped}
}

function namespacesByKind(objects: readonly ObservedObject[]): Map<GcKind, Set<string>> {
  const byKind = new Map<GcKind, Set<string>>()
  for (const {kind, meta} of objects) {
    if (meta.namespace === undefined) continue
    let namespaces = byKind.get(kind)
    if (namespaces === undefined) {
      namespaces = new Set()
      byKind.set(kind, namespaces)
    }
    namespaces.add(meta.namespace)
  }
  return byKind
}

function reportOf(object: StaleObject, result: ObjectResult, deleting: boolean, error?: string): StaleObjectReport {
  return {
    kind: object.kind.kind,
    namespace: object.meta.namespace,
    name: object.meta.name,
    uid: object.meta.uid,
    node: object.node,
    reason: object.reason,
    action: deleting ? 'delete' : 'none',
    result,
    error,
  }
}
