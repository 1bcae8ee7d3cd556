import {errorMessage} from '../errors.js'
import {deleteExactly, type DeleteOutcome} from '../kube/delete-object.js'
import type {KubeClient} from '../kube/kube-client.js'
import {isStillStale} from './live-nodes.js'
import type {StaleObject} from './sweep-planner.js'

export interface DeleteResult {
  readonly object: StaleObject
  readonly outcome: DeleteOutcome | 'failed'
  readonly error?: string
}

export interface DeleteOptions {
  readonly concurrency: number
  /** How an object that changed since it was judged is judged again (the sweep's own rules). */
  readonly keepUnlabelled: boolean
  readonly listSize: number
  readonly signal?: AbortSignal
  readonly onProgress?: (progress: {done: number; failed: number; total: number}) => void
}

/**
 * Deletes stale objects, at most `concurrency` at a time, each exactly at the version that was judged
 * stale (an object that changed meanwhile is judged again). Never throws for one object: its failure is a
 * result. Once the signal aborts, objects not yet started are reported failed.
 */
export async function deleteStale(client: KubeClient, stale: readonly StaleObject[], options: DeleteOptions): Promise<DeleteResult[]> {
  let done = 0
  let failed = 0
  const deleteOne = async (object: StaleObject): Promise<DeleteResult> => {
    let result: DeleteResult
    if (options.signal?.aborted) {
      result = {error: 'cancelled before deletion', object, outcome: 'failed'}
    } else {
      try {
        const outcome = await deleteExactly(client, object.kind.resource, object.meta, {
          signal: options.signal,
          stillWanted: (meta) => isStillStale(client, {kind: object.kind, meta}, {keepUnlabelled: options.keepUnlabelled, pageSize: options.listSize, signal: options.signal}),
        })
        result = {object, outcome}
      } catch (error) {
        result = {error: errorMessage(error), object, outcome: 'failed'}
      }
    }
    done++
    if (result.outcome === 'failed') failed++
    options.onProgress?.({done, failed, total: stale.length})
    return result
  }
  // A few workers taking the next object, not a promise per object queued up front: 4,000 of those
  // outlive many young-generation collections and end up as old-generation garbage.
  const results: DeleteResult[] = Array.from({length: stale.length})
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < stale.length) {
      const index = next++
      results[index] = await deleteOne(stale[index]!)
    }
  }
  await Promise.all(Array.from({length: Math.min(options.concurrency, stale.length)}, worker))
  return results
}
