import {AbortedError, SafetyStopError, errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import {listMetadata} from '../kube/metadata-list.js'
import {describeResource, nodesResource} from '../kube/resource.js'
import type {GcKind} from './kinds.js'
import type {ClusterView, ObservedObject} from './sweep-planner.js'

export type ReadEvent =
  | {type: 'listing'; what: string; total: number; restarted: boolean}
  | {type: 'listed'; what: string; total: number}
  | {type: 'kind-skipped'; kind: string; reason: string}
  | {type: 'list-failed'; what: string}

export interface ReadOptions {
  readonly kinds: readonly GcKind[]
  readonly listSize: number
  readonly signal?: AbortSignal
  readonly onEvent?: (event: ReadEvent) => void
  /**
   * Where Nodes come from: a live cache (gc run), read after the objects are listed; default: a fresh
   * paginated list (gc once).
   */
  readonly nodes?: () => Iterable<string>
  /** Test seam for real-server races: runs after each page of a listing. */
  readonly afterPage?: (what: string, page: number) => Promise<void>
}

export interface ClusterRead {
  readonly view: ClusterView
  readonly scanned: ReadonlyMap<GcKind, number>
  readonly skipped: ReadonlyMap<GcKind, string>
}

/**
 * Lists every object of the chosen kinds, then the Nodes. Objects first: an object whose Node is created
 * while we read is then still matched, because that Node is in the later node list. The kinds are listed
 * side by side (they do not depend on each other), which takes a third off a sweep's reading time.
 * Any failure to read a kind or the nodes aborts the read: a partial view must never be planned on.
 */
export async function readCluster(client: KubeClient, options: ReadOptions): Promise<ClusterRead> {
  const scanned = new Map<GcKind, number>()
  const skipped = new Map<GcKind, string>()
  const readKind = async (kind: GcKind): Promise<ObservedObject[]> => {
    let page = 0
    try {
      const list = await listMetadata(client, kind.resource, {
        onPage: async ({restarted, total}) => {
          options.onEvent?.({restarted, total, type: 'listing', what: kind.kind})
          await options.afterPage?.(kind.kind, ++page)
        },
        pageSize: options.listSize,
        signal: options.signal,
      })
      scanned.set(kind, list.items.length)
      options.onEvent?.({total: list.items.length, type: 'listed', what: kind.kind})
      return list.items.map((meta) => ({kind, meta}))
    } catch (error) {
      if (error instanceof AbortedError) throw error
      if (!isStatus(error, 'NotFound')) {
        options.onEvent?.({type: 'list-failed', what: kind.kind})
        throw new SafetyStopError(`cannot list ${kind.kind} objects; nothing deleted: ${errorMessage(error)}`, {cause: error})
      }
      const reason = `${describeResource(kind.resource)} is not served (is the CRD ${kind.crd} installed?); skipped`
      skipped.set(kind, reason)
      options.onEvent?.({kind: kind.kind, reason, type: 'kind-skipped'})
      return []
    }
  }
  // Every kind is read to its end, so the error is always the first kind's in the order given.
  const settled = await Promise.allSettled(options.kinds.map((kind) => readKind(kind)))
  const failure = settled.find((r) => r.status === 'rejected')
  if (failure?.status === 'rejected') throw failure.reason
  const objects = settled.flatMap((r) => (r.status === 'fulfilled' ? r.value : []))
  if (options.nodes) return {scanned, skipped, view: {nodes: new Set(options.nodes()), objects}}
  let nodes: Set<string>
  try {
    const list = await listMetadata(client, nodesResource, {
      onPage: ({restarted, total}) => options.onEvent?.({restarted, total, type: 'listing', what: 'Node'}),
      pageSize: options.listSize,
      signal: options.signal,
    })
    nodes = new Set(list.items.map((n) => n.name))
    options.onEvent?.({total: nodes.size, type: 'listed', what: 'Node'})
  } catch (error) {
    if (error instanceof AbortedError) throw error
    options.onEvent?.({type: 'list-failed', what: 'Node'})
    if (isStatus(error, 'Forbidden')) {
      throw new SafetyStopError(`cannot list Nodes (${errorMessage(error)}); nothing deleted: grant "list" on nodes to this identity`, {cause: error})
    }
    throw new SafetyStopError(`cannot list Nodes; nothing deleted: ${errorMessage(error)}`, {cause: error})
  }
  return {scanned, skipped, view: {nodes, objects}}
}
