import {isStatus} from './api-error.js'
import type {KubeClient} from './kube-client.js'
import {objectPath, type ResourceRef} from './resource.js'

/** deleted: gone now because of us; absent: already gone; replaced: same name, another UID (kept). */
export type DeleteOutcome = 'absent' | 'deleted' | 'replaced'

/**
 * Deletes exactly the object that was observed: the UID precondition makes the server refuse (409) if the
 * name now belongs to a newer object, which is then left alone.
 */
export async function deleteWithUid(
  client: KubeClient,
  ref: ResourceRef,
  target: {name: string; namespace?: string; uid: string},
  signal?: AbortSignal,
): Promise<DeleteOutcome> {
  try {
    await client.request('DELETE', objectPath(ref, target.name, target.namespace), {
      body: {apiVersion: 'v1', kind: 'DeleteOptions', preconditions: {uid: target.uid}, propagationPolicy: 'Background'},
      signal,
    })
    return 'deleted'
  } catch (error) {
    if (isStatus(error, 'NotFound')) return 'absent'
    if (isStatus(error, 'Conflict')) return 'replaced'
    throw error
  }
}
