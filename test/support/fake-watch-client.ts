import {KubeApiError} from '../../src/lib/kube/api-error.js'
import type {RequestOptions} from '../../src/lib/kube/kube-client.js'
import {FakeApiClient} from './fake-api-client.js'

type Item = {event: unknown} | {error: unknown} | {end: true}

/**
 * One watch stream the test drives: what it pushes is what the API server sent, in order. Aborting the
 * watch's signal (the informer's stop or idle timeout) breaks the stream as a destroyed request does.
 */
export class FakeWatch {
  readonly #items: Item[] = []
  #wake?: () => void
  #closed = false

  constructor(
    readonly path: string,
    readonly query: RequestOptions['query'],
    readonly signal: AbortSignal,
  ) {
    signal.addEventListener('abort', () => this.#push({error: signal.reason}), {once: true})
  }

  /** The stream has ended (by the server, a failure or the client) and the client has read that. */
  get closed(): boolean {
    return this.#closed
  }

  event(type: 'ADDED' | 'DELETED' | 'MODIFIED', object: unknown): void {
    this.#push({event: {object, type}})
  }

  bookmark(resourceVersion: string): void {
    this.#push({event: {object: {metadata: {resourceVersion}}, type: 'BOOKMARK'}})
  }

  /** An ERROR event inside the 200 stream (410: the resourceVersion is older than the watch cache keeps). */
  errorEvent(code: number, message = `fake status ${code}`): void {
    this.#push({event: {object: {code, message}, type: 'ERROR'}})
  }

  /** The connection breaks (a reset, a proxy's cut). */
  fail(error: Error): void {
    this.#push({error})
  }

  /** The server ends the watch normally (its timeoutSeconds passed). */
  end(): void {
    this.#push({end: true})
  }

  async *stream(): AsyncGenerator<unknown> {
    try {
      for (;;) {
        const item = this.#items.shift()
        if (item === undefined) {
          await new Promise<void>((resolve) => (this.#wake = resolve))
          continue
        }
        if ('end' in item) return
        if ('error' in item) throw item.error
        yield item.event
      }
    } finally {
      this.#closed = true
    }
  }

  #push(item: Item): void {
    this.#items.push(item)
    this.#wake?.()
    this.#wake = undefined
  }
}

/**
 * The API server of an informer, without an API server: list pages are single requests queued as in
 * FakeApiClient, and each openWatch either fails as queued (refuseWatch) or opens a FakeWatch the test
 * pushes events into. Watches are recorded in `requests` as `WATCH path`, in order with the lists.
 */
export class FakeWatchClient extends FakeApiClient {
  readonly watches: FakeWatch[] = []
  readonly #refusals: Array<number | Error> = []
  readonly #waiting = new Map<number, () => void>()

  /** The next openWatch fails: a status code (the KubeApiError the real client throws) or a connection error. */
  refuseWatch(failure: number | Error): void {
    this.#refusals.push(failure)
  }

  async openWatch(path: string, options: {query?: RequestOptions['query']; signal?: AbortSignal; timeoutMs: number}): Promise<AsyncGenerator<unknown>> {
    this.requests.push(`WATCH ${path}`)
    this.sent.push({method: 'WATCH', path, query: options.query})
    const refusal = this.#refusals.shift()
    if (typeof refusal === 'number') throw new KubeApiError('GET', path, refusal, `fake status ${refusal}`)
    if (refusal !== undefined) throw refusal
    const watch = new FakeWatch(path, options.query, options.signal ?? new AbortController().signal)
    this.watches.push(watch)
    this.#waiting.get(this.watches.length - 1)?.()
    return watch.stream()
  }

  /** The `index`th watch opened (0: the first), once it is. */
  async watch(index: number): Promise<FakeWatch> {
    const opened = this.watches[index]
    if (opened !== undefined) return opened
    await new Promise<void>((resolve) => this.#waiting.set(index, resolve))
    return this.watches[index]!
  }
}
