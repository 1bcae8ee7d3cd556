import {isStatus} from './api-error.js'
import type {KubeClient} from './kube-client.js'
import {findMetadata, metadataObjectAccept} from './metadata-list.js'
import {describeResource, objectPath, type ObjectMeta, type ResourceRef} from './resource.js'

/**
 * deleted: gone now because of us; absent: already gone (or being deleted by someone else);
 * replaced: the name belongs to another object (other UID), kept; changed: the object changed since it was
 * judged and, judged again, is no longer wanted gone, kept.
 */
export type DeleteOutcome = 'absent' | 'changed' | 'deleted' | 'replaced'

export interface DeleteTarget {
  readonly name: string
  readonly namespace?: string
  readonly uid: string
  /** The version that was judged; the server refuses (409) to delete any other. */
  readonly resourceVersion?: string
}

export interface DeleteExactlyOptions {
  /** Asked when the object changed since it was judged: does its current state still call for deletion? */
  readonly stillWanted: (current: ObjectMeta) => Promise<boolean>
  readonly signal?: AbortSignal
}

/** How often an object that keeps changing under us is judged again before giving up on it for now. */
const maxJudgements = 3

/**
 * Deletes exactly the object version that was judged: UID and resourceVersion preconditions make the
 * server refuse (409) if the object changed or the name now belongs to a newer object. A refused delete is
 * never repeated blind: the object is read again and judged again, and deleted (at its new version) only if
 * that judgement still wants it gone.
 */
export async function deleteExactly(client: KubeClient, ref: ResourceRef, target: DeleteTarget, options: DeleteExactlyOptions): Promise<DeleteOutcome> {
  const path = objectPath(ref, target.name, target.namespace)
  // A connection that broke after the server had the request: its delete may have happened.
  let mayHaveLanded = false
  const gone = (): DeleteOutcome => (mayHaveLanded ? 'deleted' : 'absent')
  let resourceVersion = target.resourceVersion
  for (let judgements = 1; ; judgements++) {
    try {
      await client.request('DELETE', path, {
        // Asked for as metadata, the server answers a short Status instead of the whole deleted object: less
        // for it to encode and for us to read, on every one of a mass cleanup's deletes.
        accept: metadataObjectAccept,
        body: {apiVersion: 'v1', kind: 'DeleteOptions', preconditions: {resourceVersion, uid: target.uid}, propagationPolicy: 'Background'},
        onRetry: (failure) => {
          if (failure === 'network') mayHaveLanded = true
        },
        signal: options.signal,
      })
      return 'deleted'
    } catch (error) {
      if (isStatus(error, 'NotFound')) return gone()
      if (!isStatus(error, 'Conflict')) throw error
    }
    // Read back with `list`, the permission a collector already has, not `get`.
    const current = await findMetadata(client, ref, target.name, target.namespace, options.signal)
    if (current === undefined || (current.uid === target.uid && current.deletionTimestamp !== undefined)) return gone()
    if (current.uid !== target.uid) return 'replaced'
    if (!(await options.stillWanted(current))) return 'changed'
    if (judgements >= maxJudgements) {
      throw new Error(`${describeResource(ref)} ${target.namespace ? `${target.namespace}/` : ''}${target.name} changed ${maxJudgements} times while being deleted; left for the next sweep`)
    }
    resourceVersion = current.resourceVersion
  }
}
