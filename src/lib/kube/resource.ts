/** An API resource, addressed the way the REST paths need it. */
export interface ResourceRef {
  /** '' for the core group. */
  readonly group: string
  readonly version: string
  readonly plural: string
  readonly namespaced: boolean
}

/** The metadata nfdctl reads from every object (PartialObjectMetadata). */
export interface ObjectMeta {
  readonly name: string
  readonly namespace?: string
  readonly uid: string
  readonly resourceVersion?: string
  readonly labels?: Readonly<Record<string, string>>
  /** Set once the object is being deleted (finalizers pending). */
  readonly deletionTimestamp?: string
}

export const nodesResource: ResourceRef = {group: '', namespaced: false, plural: 'nodes', version: 'v1'}

function groupVersionPath(ref: ResourceRef): string {
  return ref.group === '' ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`
}

/** The collection path; across all namespaces when `namespace` is omitted. */
export function collectionPath(ref: ResourceRef, namespace?: string): string {
  const base = groupVersionPath(ref)
  return ref.namespaced && namespace !== undefined ? `${base}/namespaces/${encodeURIComponent(namespace)}/${ref.plural}` : `${base}/${ref.plural}`
}

export function objectPath(ref: ResourceRef, name: string, namespace?: string): string {
  if (ref.namespaced && namespace === undefined) throw new TypeError(`${ref.plural} is namespaced; a namespace is required`)
  return `${collectionPath(ref, namespace)}/${encodeURIComponent(name)}`
}

/** "nodefeatures.nfd.k8s-sigs.io/v1alpha1", as kubectl names a resource. */
export function describeResource(ref: ResourceRef): string {
  return ref.group === '' ? `${ref.plural}/${ref.version}` : `${ref.plural}.${ref.group}/${ref.version}`
}
