import {AbortedError, ApiUnavailableError} from '../errors.js'
import {collectYoungGarbage} from '../memory.js'
import {isStatus} from './api-error.js'
import type {KubeClient} from './kube-client.js'
import {decodeMetadataList, protobufContentType, type KeptMetadata, type ListPageMeta} from './protobuf-metadata.js'
import {collectionPath, describeResource, type ObjectMeta, type ResourceRef} from './resource.js'

/** Ask for PartialObjectMetadataList, falling back to the full list where a server cannot convert. */
export const metadataListAccept = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json'
/**
 * The same in Kubernetes' protobuf encoding first, which the server offers for every built-in resource and
 * every CRD (the list type is meta.k8s.io's PartialObjectMetadataList, not the resource's own); JSON where it
 * does not. Measured on the test control plane, 15,000 objects in 30 pages: 4.5 MB instead of 8.1 MB, read in
 * about half the time, and about half the API server's CPU (Go's JSON encoder is its slow part), which on a
 * small control plane is taken from the deletes that follow.
 */
export const protobufMetadataListAccept = `${protobufContentType};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,${metadataListAccept}`
/** The same for one object, or for the objects of a watch stream. */
export const metadataObjectAccept = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json'

/** A page body from this size on is followed by a collection of the young generation (collectYoungGarbage). */
const largePageBytes = 1024 * 1024

/** The one call a list makes: the real KubeClient, or a fake in unit tests. */
export type ListClient = Pick<KubeClient, 'request'>

export interface ListOptions {
  /** Only this namespace's objects (of a namespaced resource); default all namespaces. */
  readonly namespace?: string
  readonly labelSelector?: string
  readonly fieldSelector?: string
  /** Page size (`limit`); 0 lists everything in one response. */
  readonly pageSize: number
  /** How often an expired continue token (410) may restart the list from scratch. */
  readonly maxRestarts?: number
  readonly signal?: AbortSignal
  /** Its pages skip the client's concurrency window (RequestOptions.critical). */
  readonly critical?: boolean
  /** false: each item's labels are skipped unread (default true; see KeptMetadata). */
  readonly labels?: boolean
  /**
   * Called after each page with the running count and the page's own items' metadata (in the server's
   * order: key order); `restarted` is true on the first page of a restart.
   */
  readonly onPage?: (page: {items: number; total: number; restarted: boolean; continueToken?: string; metas: readonly ObjectMeta[]}) => Promise<void> | void
}

export interface ListResult {
  readonly items: ObjectMeta[]
  /** The list's resourceVersion, constant across its pages. */
  readonly resourceVersion: string
  readonly pages: number
  readonly restarts: number
}

interface ObjectList {
  metadata?: {continue?: string; resourceVersion?: string}
  items?: unknown[]
}

/** How a list or watch asks for its objects and what it keeps of each. */
export interface ObjectCodec<T> {
  /** Accept header of lists (metadata-only, or plain JSON for whole objects). */
  readonly listAccept: string
  /** Accept header of a watch stream's objects. */
  readonly watchAccept: string
  /** What to keep of one list item or watched object; undefined skips it. */
  readonly toItem: (raw: unknown) => T | undefined
  readonly metaOf: (item: T) => ObjectMeta
  /** Decodes a list page the server sent in protobuf (when listAccept asks for it first). */
  readonly decodeListPage?: (body: Buffer) => {items: T[]; metadata: ListPageMeta}
}

/** Metadata only, trimmed to the fields nfdctl reads (toMeta); labels too unless `kept` says not. */
export function metadataCodecOf(kept: KeptMetadata): ObjectCodec<ObjectMeta> {
  return {
    decodeListPage: (body) => decodeMetadataList(body, kept),
    listAccept: protobufMetadataListAccept,
    metaOf: (m) => m,
    toItem: (raw) => {
      const meta = (raw as {metadata?: ObjectMeta}).metadata
      return meta === undefined ? undefined : toMeta(meta, kept)
    },
    watchAccept: metadataObjectAccept,
  }
}
export const metadataCodec = metadataCodecOf({labels: true})
/**
 * The same without labels: what the GC keeps of a Node. NFD puts about a hundred labels on each Node; kept,
 * they take `gc run` with 2,000 such Nodes cached from 75 to 130 MB (bench:gc-run, docs/benchmarks.md).
 */
export const unlabelledMetadataCodec = metadataCodecOf({labels: false})

export interface ObjectListResult<T> extends Omit<ListResult, 'items'> {
  readonly items: T[]
}

/**
 * Lists one resource's metadata page by page. An expired continue token (410 Gone) restarts the list
 * from the beginning instead of accepting the server's inconsistent remainder: a GC must see a
 * consistent snapshot or nothing.
 */
export async function listMetadata(client: ListClient, ref: ResourceRef, options: ListOptions): Promise<ListResult> {
  return listObjects(client, ref, options.labels === false ? unlabelledMetadataCodec : metadataCodec, options)
}

/** The same for any codec: whole objects (the agent's pods and classes) or metadata. */
export async function listObjects<T>(client: ListClient, ref: ResourceRef, codec: ObjectCodec<T>, options: ListOptions): Promise<ObjectListResult<T>> {
  const maxRestarts = options.maxRestarts ?? 3
  for (let restarts = 0; ; restarts++) {
    const items: T[] = []
    let continueToken: string | undefined
    let resourceVersion = ''
    let pages = 0
    // A page of labelled Nodes is megabytes of chunks and their joined copy, all dead once it is decoded:
    // collected before the next page comes, not when V8 gets to them.
    let largePage = false
    const collectLargePage = (): void => {
      if (largePage) collectYoungGarbage()
      largePage = false
    }
    try {
      do {
        collectLargePage()
        const body = await client.request<ObjectList | Buffer>('GET', collectionPath(ref, options.namespace), {
          accept: codec.listAccept,
          query: {continue: continueToken, fieldSelector: options.fieldSelector, labelSelector: options.labelSelector, limit: options.pageSize || undefined},
          critical: options.critical,
          signal: options.signal,
        })
        pages++
        const first = items.length
        let count: number
        let metadata: ListPageMeta | undefined
        if (Buffer.isBuffer(body)) {
          if (codec.decodeListPage === undefined) throw new Error(`listing ${describeResource(ref)}: the server answered in protobuf, which was not asked for`)
          const page = codec.decodeListPage(body)
          items.push(...page.items)
          count = page.items.length
          metadata = page.metadata
          largePage = body.length >= largePageBytes
        } else {
          for (const raw of body.items ?? []) {
            const item = codec.toItem(raw)
            if (item !== undefined) items.push(item)
          }
          count = body.items?.length ?? 0
          metadata = body.metadata
        }
        continueToken = metadata?.continue || undefined
        resourceVersion = metadata?.resourceVersion ?? resourceVersion
        const pageItems = items
        await options.onPage?.({
          continueToken,
          items: count,
          // Made only for a caller that reads them (the node check), not on every page of every list.
          get metas() {
            return pageItems.slice(first).map(codec.metaOf)
          },
          restarted: restarts > 0 && pages === 1,
          total: items.length,
        })
      } while (continueToken !== undefined)
      collectLargePage()
      return {items, pages, resourceVersion, restarts}
    } catch (error) {
      if (error instanceof AbortedError) throw error
      if (!isStatus(error, 'Gone') || continueToken === undefined) throw error
      if (restarts >= maxRestarts) {
        throw new ApiUnavailableError(`listing ${describeResource(ref)}: continue token expired ${restarts + 1} times; try a larger --list-size`, {cause: error})
      }
    }
  }
}

/**
 * Keeps only the fields nfdctl uses, so a 5,000-node cache does not hold managedFields (nor a creation
 * time per object, which nothing reads: 65,000 strings in `gc run`'s cache at the largest clusters).
 */
export function toMeta(m: ObjectMeta, kept: KeptMetadata = {labels: true}): ObjectMeta {
  return {deletionTimestamp: m.deletionTimestamp, labels: kept.labels ? m.labels : undefined, name: m.name, namespace: m.namespace, resourceVersion: m.resourceVersion, uid: m.uid}
}

/**
 * One object's metadata read with `list` permission only (a field selector on its name), for callers whose
 * least-privilege role has no `get`; undefined when it does not exist.
 */
export async function findMetadata(client: ListClient, ref: ResourceRef, name: string, namespace?: string, signal?: AbortSignal): Promise<ObjectMeta | undefined> {
  const list = await listMetadata(client, ref, {fieldSelector: `metadata.name=${name}`, namespace: ref.namespaced ? namespace : undefined, pageSize: 0, signal})
  return list.items.find((m) => m.name === name && (!ref.namespaced || m.namespace === namespace))
}

/** One object's metadata, or undefined when it does not exist. */
export async function getMetadata(client: ListClient, path: string, signal?: AbortSignal): Promise<ObjectMeta | undefined> {
  try {
    const object = await client.request<{metadata: ObjectMeta}>('GET', path, {accept: metadataObjectAccept, signal})
    return toMeta(object.metadata)
  } catch (error) {
    if (isStatus(error, 'NotFound')) return undefined
    throw error
  }
}
