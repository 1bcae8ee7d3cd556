import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import {findMetadata, getMetadata, listMetadata} from '../kube/metadata-list.js'
import {objectPath} from '../kube/resource.js'
import type {GcKind} from './kinds.js'
import type {ObservedObject} from './sweep-planner.js'

/** Label selectors stay well under URL limits with this many node names each. */
const namesPerSelector = 50

/**
 * The objects of the given nodes that are found by name alone: kinds named after their node (a metadata
 * GET each), and labelled kinds in the namespaces given for them, where their writer names an object after
 * its node (nfd-worker does), looked up with a `metadata.name` field selector. The API server answers
 * those from its cache by key, at any cluster size, whereas a label selector makes it scan every object of
 * the kind (96 ms at 65,000 NodeFeatures, 4 ms by name). Labelled objects found so still name the node in
 * their label; what else the label selector would find is for findObjectsOfNodes.
 */
export async function findObjectsNamedAfterNodes(
  client: KubeClient,
  kinds: readonly GcKind[],
  nodes: readonly string[],
  namespaces: (kind: GcKind) => Iterable<string>,
  signal?: AbortSignal,
): Promise<ObservedObject[]> {
  const found: ObservedObject[] = []
  for (const kind of kinds) {
    try {
      if (kind.byNodes === 'name') {
        found.push(...(await findObjectsOfNodes(client, [kind], nodes, 0, signal)))
        continue
      }
      for (const namespace of namespaces(kind)) {
        for (const node of nodes) {
          const meta = await findMetadata(client, kind.resource, node, namespace, signal)
          if (meta !== undefined && kind.nodeOf(meta) === node) found.push({kind, meta})
        }
      }
    } catch (error) {
      if (!isStatus(error, 'NotFound')) throw error
    }
  }
  return found
}

/**
 * The objects that belong to the given nodes, without a cluster-wide list: a set-based label selector
 * (`node-name in (a,b,…)`) for labelled kinds, a metadata GET per name for kinds named after the node.
 * A kind whose CRD is not installed yields nothing.
 */
export async function findObjectsOfNodes(client: KubeClient, kinds: readonly GcKind[], nodes: readonly string[], pageSize: number, signal?: AbortSignal): Promise<ObservedObject[]> {
  const found: ObservedObject[] = []
  for (const kind of kinds) {
    const strategy = kind.byNodes
    try {
      if (strategy === 'name') {
        for (const name of nodes) {
          const meta = await getMetadata(client, objectPath(kind.resource, name), signal)
          if (meta) found.push({kind, meta})
        }
      } else {
        for (let i = 0; i < nodes.length; i += namesPerSelector) {
          const list = await listMetadata(client, kind.resource, {labelSelector: strategy.labelSelector(nodes.slice(i, i + namesPerSelector)), pageSize, signal})
          for (const meta of list.items) found.push({kind, meta})
        }
      }
    } catch (error) {
      if (!isStatus(error, 'NotFound')) throw error
    }
  }
  return found
}
