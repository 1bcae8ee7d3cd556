import type {KubeClient} from '../kube/kube-client.js'
import {listMetadata} from '../kube/metadata-list.js'
import {nodesResource} from '../kube/resource.js'
import {judgeObject, type ObservedObject, type StaleObject} from './sweep-planner.js'
import {withResolvers, type Resolvers} from '../with-resolvers.js'

/** Up to this many nodes are checked one by one; more, with one fresh node list. */
const singleChecks = 20

/** The API server's answer on some node names, given name by name as it comes in. */
export interface NodeCheck {
  /** Whether this Node exists by the check's answer; waits until the check reached the name, rejects when the check failed first. */
  exists(name: string): Promise<boolean>
  /** Every answer given; rejects with the check's failure. */
  readonly done: Promise<void>
  /** Answered page by page from one node list (above singleChecks names), not all at once. */
  readonly streamed: boolean
}

/**
 * Asks the API server which of these node names exist right now, not a cache that may be frozen by a
 * stalled watch. Uses only `list` on nodes, the permission the collector already has: a `metadata.name`
 * field selector per name (no resourceVersion: as fresh as a quorum read), side by side; above singleChecks
 * names, one paginated node list, whose pages answer names as they come (NamesByPage): a caller waiting on
 * a name can go on while the rest of the list is read. Any failure rejects the answers not given: no answer
 * must never read as "the node is gone".
 */
export function checkNodes(client: KubeClient, names: readonly string[], pageSize: number, signal?: AbortSignal): NodeCheck {
  const answers = new Map<string, Resolvers<boolean>>()
  for (const name of names) {
    if (answers.has(name)) continue
    const answer = withResolvers<boolean>()
    // A rejection no one waits for (a name no delete asks about any more) is not reported as unhandled.
    answer.promise.catch(() => {})
    answers.set(name, answer)
  }
  const give = (name: string, exists: boolean): void => answers.get(name)!.resolve(exists)
  const streamed = answers.size > singleChecks
  const read = async (): Promise<void> => {
    if (!streamed) {
      await Promise.all(
        [...answers.keys()].map(async (name) => {
          const list = await listMetadata(client, nodesResource, {fieldSelector: `metadata.name=${name}`, labels: false, pageSize: 1, signal})
          give(
            name,
            list.items.some((n) => n.name === name),
          )
        }),
      )
      return
    }
    const pages = new NamesByPage(answers.keys())
    // Deletes wait for these pages: they skip the window (as a lease renewal does), so they neither queue
    // behind the deletes they gate nor have their latency beside a burst of deletes, slower than the quiet
    // pages of the first reads, read as the server queueing us (a cut of the deletes' window).
    await listMetadata(client, nodesResource, {
      critical: true,
      labels: false,
      onPage: ({metas, restarted}) => {
        for (const [name, exists] of pages.page(metas, restarted)) give(name, exists)
      },
      pageSize,
      signal,
    })
    for (const [name, exists] of pages.rest()) give(name, exists)
  }
  const done = read().catch((error: unknown) => {
    // Answers already given stand; the others fail with the check.
    for (const a of answers.values()) a.reject(error)
    throw error
  })
  done.catch(() => {})
  return {
    done,
    streamed,
    exists: (name) => answers.get(name)?.promise ?? Promise.reject(new Error(`node ${name} was not among the names checked`)),
  }
}

/**
 * Which of these node names exist right now, by checkNodes: every answer awaited. Any failure throws: no
 * answer must never read as "the node is gone".
 */
export async function existingNodes(client: KubeClient, names: readonly string[], pageSize: number, signal?: AbortSignal): Promise<Set<string>> {
  const check = checkNodes(client, names, pageSize, signal)
  await check.done
  const found = await Promise.all(names.map(async (name) => ((await check.exists(name)) ? [name] : [])))
  return new Set(found.flat())
}

/**
 * Which of some names a paginated node list has answered, page by page. The API server lists in key order,
 * for Nodes name order (each continue token resumes after its page's last key), so once a page is read,
 * every name up to its last one is answered by that list: there, or absent. A restarted list (expired
 * continue token) is a new snapshot: what the earlier one answered stands, the rest is answered by the new
 * one. A page out of that order (never seen from a kube-apiserver) leaves every open name to the end. Pure.
 */
export class NamesByPage {
  readonly #waiting: string[]
  readonly #wanted: ReadonlySet<string>
  #next = 0
  #seen = new Set<string>()
  #last: string | undefined
  #ordered = true

  constructor(names: Iterable<string>) {
    this.#wanted = new Set(names)
    this.#waiting = [...this.#wanted].sort()
  }

  /** The names this page answers, each with whether it exists. */
  page(metas: ReadonlyArray<{name: string}>, restarted: boolean): Array<[string, boolean]> {
    if (restarted) {
      this.#seen = new Set()
      this.#last = undefined
    }
    for (const {name} of metas) {
      if (this.#last !== undefined && name <= this.#last) this.#ordered = false
      this.#last = name
      if (this.#wanted.has(name)) this.#seen.add(name)
    }
    const upTo = this.#last
    return this.#ordered && upTo !== undefined ? this.#answer((name) => name <= upTo) : []
  }

  /** Once the list is complete: every name not answered yet. */
  rest(): Array<[string, boolean]> {
    return this.#answer(() => true)
  }

  #answer(reached: (name: string) => boolean): Array<[string, boolean]> {
    const answered: Array<[string, boolean]> = []
    for (; this.#next < this.#waiting.length && reached(this.#waiting[this.#next]!); this.#next++) {
      const name = this.#waiting[this.#next]!
      answered.push([name, this.#seen.has(name)])
    }
    return answered
  }
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
