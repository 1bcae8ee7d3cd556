import type {ObjectMeta} from '../kube/resource.js'
import type {GcKind} from './kinds.js'

export type StaleReason = 'node-gone' | 'no-node-label'

export interface ObservedObject {
  readonly kind: GcKind
  readonly meta: ObjectMeta
}

export interface StaleObject extends ObservedObject {
  /** The node the object names; undefined for an unlabelled NodeFeature. */
  readonly node?: string
  readonly reason: StaleReason
}

/** What one sweep saw: every object of the listed kinds and the complete set of Nodes, a snapshot taken after theirs. */
export interface ClusterView {
  readonly objects: readonly ObservedObject[]
  readonly nodes: ReadonlySet<string>
}

export interface PlanOptions {
  readonly allowEmptyNodes: boolean
  readonly force: boolean
  readonly keepUnlabelled: boolean
  /** 0..1: refuse when more than this share of the scanned objects would be deleted (unless force). */
  readonly maxDeleteRatio: number
}

export type SweepPlan = {readonly action: 'delete'; readonly stale: readonly StaleObject[]} | {readonly action: 'refuse'; readonly reason: string; readonly stale: readonly StaleObject[]}

export const staleReasonText: Record<StaleReason, string> = {
  'no-node-label': 'no nfd.node.kubernetes.io/node-name label',
  'node-gone': 'node does not exist',
}

/** One object's verdict: stale (and why), or undefined when its node exists or it is an unlabelled object to keep. */
export function judgeObject(object: ObservedObject, nodes: {has: (name: string) => boolean}, keepUnlabelled: boolean): StaleObject | undefined {
  const node = object.kind.nodeOf(object.meta)
  if (node === undefined) return keepUnlabelled ? undefined : {...object, reason: 'no-node-label'}
  return nodes.has(node) ? undefined : {...object, node, reason: 'node-gone'}
}

/** Decides which objects are stale, and whether deleting them is safe. Pure. */
export function planSweep(view: ClusterView, options: PlanOptions): SweepPlan {
  const stale = view.objects.flatMap((object) => judgeObject(object, view.nodes, options.keepUnlabelled) ?? [])
  if (stale.length === 0) return {action: 'delete', stale}
  if (view.nodes.size === 0 && !options.allowEmptyNodes) {
    return {action: 'refuse', reason: `the cluster lists no Nodes, so all ${stale.length} objects look stale; nothing deleted (pass --allow-empty-nodes if the cluster really has no nodes)`, stale}
  }
  // Divide rather than multiply: 29/100 rounds to the same double as 0.29, 0.29 * 100 does not give 29.
  if (!options.force && stale.length / view.objects.length > options.maxDeleteRatio) {
    const percent = Math.round((100 * stale.length) / view.objects.length)
    return {
      action: 'refuse',
      reason: `${stale.length} of ${view.objects.length} objects (${percent}%) are stale, above --max-delete-ratio ${options.maxDeleteRatio}; nothing deleted (check the node list, then raise the ratio or pass --force)`,
      stale,
    }
  }
  return {action: 'delete', stale}
}
