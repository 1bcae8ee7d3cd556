import type {KubeClient} from '../kube/kube-client.js'
import {listMetadata} from '../kube/metadata-list.js'
import {nodesResource} from '../kube/resource.js'
import {judgeObject, type ObservedObject, type StaleObject} from './sweep-planner.js'

/** Up to this many nodes are checked one by one; more, with one fresh node list. */
const singleChecks = 20

/**
 * Which of these node names exist right now, read from the API server, not from a cache that may be frozen
 * by a stalled watch. Uses only `list` on nodes (a field selector per name), the permission the collector
 * already has. Any failure throws: no answer must never read as "the node is gone".
 */
export async function existingNodes(client: KubeClient, names: readonly string[], pageSize: number, signal?: AbortSignal): Promise<Set<string>> {
  const wanted = new Set(names)
  if (wanted.size > singleChecks) {
    const list = await listMetadata(client, nodesResource, {pageSize, signal})
    return new Set(list.items.map((n) => n.name).filter((n) => wanted.has(n)))
  }
  // Side by side: a handful of small, consistent reads (no resourceVersion: as fresh as a quorum read).
  const found = await Promise.all(
    [...wanted].map(async (name) => {
      const list = await listMetadata(client, nodesResource, {fieldSelector: `metadata.name=${name}`, pageSize: 1, signal})
      return list.items.some((n) => n.name === name) ? [name] : []
    }),
  )
  return new Set(found.flat())
}

/**
 * The stale objects whose Node exists by the API server's answer right now (see existingNodes). Asks
 * nothing when no stale object names a node; any failure throws.
 */
export async function staleWithExistingNode(client: KubeClient, stale: readonly StaleObject[], pageSize: number, signal?: AbortSignal): Promise<Set<StaleObject>> {
  const named = stale.flatMap((s) => (s.node === undefined ? [] : [s.node]))
  if (named.length === 0) return new Set()
  const alive = await existingNodes(client, named, pageSize, signal)
  return new Set(stale.filter((s) => s.node !== undefined && alive.has(s.node)))
}

/**
 * Judges an object again from its current metadata and the API server's answer on its node: is it still
 * stale? Used when an object changed between the sweep's look and its deletion.
 */
export async function isStillStale(client: KubeClient, object: ObservedObject, options: {keepUnlabelled: boolean; pageSize: number; signal?: AbortSignal}): Promise<boolean> {
  const node = object.kind.nodeOf(object.meta)
  const alive = node === undefined ? new Set<string>() : await existingNodes(client, [node], options.pageSize, options.signal)
  return judgeObject(object, alive, options.keepUnlabelled) !== undefined
}
