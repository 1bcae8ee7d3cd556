import {AbortedError, SafetyStopError, errorMessage} from '../errors.js'
import type {KubeClient} from '../kube/kube-client.js'
import {readCluster, type ClusterRead, type ReadEvent, type ReadOptions} from './cluster-reader.js'
import {deleteStale, NodeCheckError, type DeleteResult} from './deleter.js'
import {checkNodes} from './live-nodes.js'
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
  /**
   * Test seam for real-server races: runs before the first delete, after that check when it asks about a
   * few nodes (with the objects it found still stale); with more, the check runs beside the deletes, and
   * this gets every stale object.
   */
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
  if (plan.action === 'delete' && !options.dryRun && plan.stale.length > 0) {
    await hooks.afterPlan?.(plan.stale)
    results = await deleteCheckingNodes(client, plan.stale, options, hooks, signal)
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
    const outcome: ObjectResult = refused !== undefined ? 'kept' : options.dryRun ? 'would-delete' : (result?.outcome ?? 'failed')
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

/**
 * Deletes the stale objects whose Node is still gone by the API server's answer now: a long sweep's node
 * list can be minutes old, and a node that registered again under its name since then has objects that did
 * not change (so their delete preconditions hold), so the API server is asked once more, as gc run does.
 * With a few nodes to ask about (one field selector each, side by side) every answer comes before the first
 * delete. With more, one node list is read, whose pages come in name order: each object is deleted as soon
 * as a page has passed its node's name, while the rest of the list is read (the ten pages of a 5,000-node
 * list take about 100 ms, which would otherwise all come before the first delete). Every delete still comes
 * after the answer on its own node. No answer stops the deletes not started and throws.
 */
async function deleteCheckingNodes(client: KubeClient, stale: readonly StaleObject[], options: SweepOptions, hooks: SweepHooks, signal?: AbortSignal): Promise<DeleteResult[]> {
  const names = new Set(stale.flatMap((s) => (s.node === undefined ? [] : [s.node])))
  const check = checkNodes(client, [...names], options.listSize, signal)
  const nodeGone = async (s: StaleObject): Promise<boolean> => s.node === undefined || !(await check.exists(s.node))
  let ordered = stale
  if (!check.streamed) {
    await check.done.catch((error: unknown) => {
      throw checkFailed(error, 0)
    })
    const answers = await Promise.all(stale.map(nodeGone))
    await hooks.beforeDelete?.(stale.filter((_, i) => answers[i]))
  } else {
    // In the order the answers come: unnamed objects (nothing to ask) first, then by node name.
    ordered = [...stale].sort((a, b) => byNode(a.node, b.node))
    await hooks.beforeDelete?.(stale)
  }
  try {
    return await deleteStale(client, ordered, {
      concurrency: options.concurrency,
      keepUnlabelled: options.keepUnlabelled,
      listSize: options.listSize,
      nodeGone,
      onProgress: (p) => hooks.onEvent?.({...p, type: 'deleting'}),
      signal,
    })
  } catch (error) {
    throw error instanceof NodeCheckError ? checkFailed(error.cause, error.deleted) : error
  }
}

/** A failed node check as the sweep reports it: a safety stop, or the cancellation it was. */
function checkFailed(error: unknown, deleted: number): Error {
  if (error instanceof AbortedError) return error
  const what = deleted === 0 ? 'nothing deleted' : `${deleted} deleted whose Node it had found gone, the rest kept`
  return new SafetyStopError(`cannot check the stale objects' Nodes again before deleting; ${what}: ${errorMessage(error)}`, {cause: error})
}

function byNode(a: string | undefined, b: string | undefined): number {
  if (a === b) return 0
  if (a === undefined) return -1
  if (b === undefined) return 1
  return a < b ? -1 : 1
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
