import type {ObjectMeta, ResourceRef} from '../kube/resource.js'

/** The label NFD puts on a NodeFeature to name the node it describes. */
export const nodeNameLabel = 'nfd.node.kubernetes.io/node-name'

/** A kind of node-owned object the GC collects, and how an object names its node. */
export interface GcKind {
  /** Upstream's metric label value and what the user types in --kinds. */
  readonly kind: string
  readonly resource: ResourceRef
  readonly crd: string
  /** The node an object belongs to; undefined when the object does not say. */
  readonly nodeOf: (object: ObjectMeta) => string | undefined
  /** How to find the objects of given nodes without a full list: a label selector, or the object name. */
  readonly byNodes: {readonly labelSelector: (nodes: readonly string[]) => string} | 'name'
}

export const gcKinds: readonly GcKind[] = [
  {
    crd: 'nodefeatures.nfd.k8s-sigs.io',
    byNodes: {labelSelector: (nodes) => `${nodeNameLabel} in (${nodes.join(',')})`},
    kind: 'NodeFeature',
    // An empty label value names no node, exactly like a missing one.
    nodeOf: (o) => o.labels?.[nodeNameLabel] || undefined,
    resource: {group: 'nfd.k8s-sigs.io', namespaced: true, plural: 'nodefeatures', version: 'v1alpha1'},
  },
  {
    crd: 'noderesourcetopologies.topology.node.k8s.io',
    byNodes: 'name',
    kind: 'NodeResourceTopology',
    nodeOf: (o) => o.name,
    resource: {group: 'topology.node.k8s.io', namespaced: false, plural: 'noderesourcetopologies', version: 'v1alpha2'},
  },
] as const

export const gcKindNames: readonly string[] = gcKinds.map((k) => k.kind)

/** Case-insensitive lookup by kind, plural or CRD name; undefined for an unknown name. */
export function findGcKind(name: string): GcKind | undefined {
  const wanted = name.trim().toLowerCase()
  return gcKinds.find((k) => k.kind.toLowerCase() === wanted || k.resource.plural === wanted || k.crd === wanted)
}
