import {AbortedError, SafetyStopError, errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import {listMetadata} from '../kube/metadata-list.js'
import {describeResource, nodesResource} from '../kube/resource.js'
import type {GcKind} from './kinds.js'
import type {ClusterView, ObservedObject} from './sweep-planner.js'
import {withResolvers, type Resolvers} from '../with-resolvers.js'

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
   * Where Nodes come from: a live cache (gc run), read once every object list is complete; default: a fresh
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
 * Lists every object of the chosen kinds and the Nodes, each list one consistent snapshot (its pages share
 * the first page's resourceVersion). Safety needs the Node snapshot to be taken after every object snapshot:
 * an object whose Node is created while we read is then still matched, because that Node is in the node
 * list. So the node list starts once every kind's first page has come back (a quorum read sent after an
 * answer sees at least that answer's revision), and its pages run beside the kinds' remaining ones; a kind
 * whose list restarts (expired continue token) after that takes a new, later snapshot, and the nodes are
 * then listed again once it is done. The kinds are listed side by side too: they do not depend on each
 * other. Any failure to read a kind or the nodes aborts the read: a partial view must never be planned on.
 */
export async function readCluster(client: KubeClient, options: ReadOptions): Promise<ClusterRead> {
  const scanned = new Map<GcKind, number>()
  const skipped = new Map<GcKind, string>()
  const snapshots = options.kinds.map(() => withResolvers<void>())
  let failed = false
  let nodesStarted = false
  let snapshotAfterNodes = false
  const readKind = async (kind: GcKind, snapshot: Resolvers<void>): Promise<ObservedObject[]> => {
    let page = 0
    try {
      const list = await listMetadata(client, kind.resource, {
        onPage: async ({restarted, total}) => {
          if (restarted && nodesStarted) snapshotAfterNodes = true
          snapshot.resolve()
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
        failed = true
        options.onEvent?.({type: 'list-failed', what: kind.kind})
        throw new SafetyStopError(`cannot list ${kind.kind} objects; nothing deleted: ${errorMessage(error)}`, {cause: error})
      }
      const reason = `${describeResource(kind.resource)} is not served (is the CRD ${kind.crd} installed?); skipped`
      skipped.set(kind, reason)
      options.onEvent?.({kind: kind.kind, reason, type: 'kind-skipped'})
      return []
    } finally {
      // A kind not served holds no one up; one that failed ends the read (and the node list is not begun).
      snapshot.resolve()
    }
  }
  const reading = Promise.allSettled(options.kinds.map((kind, i) => readKind(kind, snapshots[i]!)))
  // gc run's nodes come from its live cache, read (below) once every object list is complete.
  let nodeList: Promise<PromiseSettledResult<Set<string>> | undefined> | undefined
  if (!options.nodes) {
    nodeList = Promise.all(snapshots.map((s) => s.promise)).then(() => {
      if (failed) return undefined
      nodesStarted = true
      return settle(readNodes(client, options))
    })
  }
  // Every kind is read to its end, so the error is always the first kind's in the order given.
  const settled = await reading
  const failure = settled.find((r) => r.status === 'rejected')
  if (failure?.status === 'rejected') {
    // No request of this read outlives it.
    await nodeList
    throw failure.reason
  }
  const objects = settled.flatMap((r) => (r.status === 'fulfilled' ? r.value : []))
  if (options.nodes) return {scanned, skipped, view: {nodes: new Set(options.nodes()), objects}}
  let nodes = (await nodeList)!
  if (nodes.status === 'fulfilled' && snapshotAfterNodes) nodes = await settle(readNodes(client, options))
  if (nodes.status === 'rejected') throw nodes.reason
  return {scanned, skipped, view: {nodes: nodes.value, objects}}
}

async function readNodes(client: KubeClient, options: ReadOptions): Promise<Set<string>> {
  try {
    const list = await listMetadata(client, nodesResource, {
      labels: false,
      onPage: ({restarted, total}) => options.onEvent?.({restarted, total, type: 'listing', what: 'Node'}),
      pageSize: options.listSize,
      signal: options.signal,
    })
    const nodes = new Set(list.items.map((n) => n.name))
    options.onEvent?.({total: nodes.size, type: 'listed', what: 'Node'})
    return nodes
  } catch (error) {
    if (error instanceof AbortedError) throw error
    options.onEvent?.({type: 'list-failed', what: 'Node'})
    if (isStatus(error, 'Forbidden')) {
      throw new SafetyStopError(`cannot list Nodes (${errorMessage(error)}); nothing deleted: grant "list" on nodes to this identity`, {cause: error})
    }
    throw new SafetyStopError(`cannot list Nodes; nothing deleted: ${errorMessage(error)}`, {cause: error})
  }
}

/** The outcome as a value, so a rejection waited on later is not reported as unhandled meanwhile. */
function settle<T>(promise: Promise<T>): Promise<PromiseSettledResult<T>> {
  return promise.then(
    (value) => ({status: 'fulfilled', value}),
    (reason: unknown) => ({reason, status: 'rejected'}),
  )
}
