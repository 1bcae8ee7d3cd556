import {errorMessage} from '../errors.js'
import {deleteExactly, type DeleteOutcome} from '../kube/delete-object.js'
import type {KubeClient} from '../kube/kube-client.js'
import {isStillStale} from './live-nodes.js'
import type {StaleObject} from './sweep-planner.js'

export interface DeleteResult {
  readonly object: StaleObject
  /** node-exists: kept, the Node was found again (DeleteOptions.nodeGone). */
  readonly outcome: DeleteOutcome | 'failed' | 'node-exists'
  readonly error?: string
}

export interface DeleteOptions {
  readonly concurrency: number
  /** How an object that changed since it was judged is judged again (the sweep's own rules). */
  readonly keepUnlabelled: boolean
  readonly listSize: number
  readonly signal?: AbortSignal
  readonly onProgress?: (progress: {done: number; failed: number; total: number}) => void
  /**
   * Asked before each object's delete, which waits for the answer: is its Node still gone? false keeps the
   * object (node-exists); a rejection starts no further delete and is thrown once those under way are done.
   * The objects are taken in the order given, so that answers coming in that order let deletes start early.
   */
  readonly nodeGone?: (object: StaleObject) => Promise<boolean>
}

/**
 * Deletes stale objects, at most `concurrency` at a time, each exactly at the version that was judged
 * stale (an object that changed meanwhile is judged again). Never throws for one object: its failure is a
 * result. Once the signal aborts, objects not yet started are reported failed.
 */
export async function deleteStale(client: KubeClient, stale: readonly StaleObject[], options: DeleteOptions): Promise<DeleteResult[]> {
  let done = 0
  let failed = 0
  let kept = 0
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
    options.onProgress?.({done, failed, total: stale.length - kept})
    return result
  }
  // A few workers taking the next object, not a promise per object queued up front: 4,000 of those
  // outlive many young-generation collections and end up as old-generation garbage.
  const results: DeleteResult[] = Array.from({length: stale.length})
  let next = 0
  let stopped: {error: unknown} | undefined
  const worker = async (): Promise<void> => {
    while (next < stale.length && stopped === undefined) {
      const index = next++
      const object = stale[index]!
      if (options.nodeGone !== undefined) {
        let gone: boolean
        try {
          gone = await options.nodeGone(object)
        } catch (error) {
          stopped ??= {error}
          return
        }
        if (stopped !== undefined) return
        if (!gone) {
          // Kept, not deleted: progress counts what is to be deleted.
          results[index] = {object, outcome: 'node-exists'}
          kept++
          options.onProgress?.({done, failed, total: stale.length - kept})
          continue
        }
      }
      results[index] = await deleteOne(object)
    }
  }
  await Promise.all(Array.from({length: Math.min(options.concurrency, stale.length)}, worker))
  if (stopped !== undefined) throw new NodeCheckError(results.filter((r) => r?.outcome === 'deleted').length, stopped.error)
  return results
}

/** The Node check behind DeleteOptions.nodeGone failed: no further delete was started. */
export class NodeCheckError extends Error {
  constructor(
    /** Objects deleted before it failed (each after the check had found its Node gone). */
    readonly deleted: number,
    cause: unknown,
  ) {
    super(errorMessage(cause), {cause})
  }
}
