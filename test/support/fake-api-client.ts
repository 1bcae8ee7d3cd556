import {KubeApiError} from '../../src/lib/kube/api-error.js'
import type {RequestOptions} from '../../src/lib/kube/kube-client.js'

/** One request as the fake received it. */
export interface SentRequest {
  readonly method: string
  readonly path: string
  readonly query?: RequestOptions['query']
  readonly body?: unknown
}

type Answer = {object: unknown} | {code: number} | {error: Error}

/**
 * The API server's answers to single requests, without an API server: the test queues an answer (an
 * object, a status code that becomes the KubeApiError the real client throws, or an error such as a refused
 * connection) per `METHOD path`; every request is recorded (`requests`, with query and body in `sent`).
 * A request with nothing queued is a 503.
 */
export class FakeApiClient {
  readonly requests: string[] = []
  readonly sent: SentRequest[] = []
  readonly #answers = new Map<string, Answer[]>()

  answer(method: string, path: string, object: unknown): void {
    this.#queue(`${method} ${path}`).push({object})
  }

  fail(method: string, path: string, failure: number | Error): void {
    this.#queue(`${method} ${path}`).push(typeof failure === 'number' ? {code: failure} : {error: failure})
  }

  async request<T>(method: string, path: string, options: Pick<RequestOptions, 'body' | 'query'> = {}): Promise<T> {
    const key = `${method} ${path}`
    this.requests.push(key)
    this.sent.push({body: structuredClone(options.body), method, path, query: options.query})
    const next = this.#answers.get(key)?.shift() ?? {code: 503}
    if ('code' in next) throw new KubeApiError(method, path, next.code, `fake status ${next.code}`)
    if ('error' in next) throw next.error
    return structuredClone(next.object) as T
  }

  #queue(key: string): Answer[] {
    const queue = this.#answers.get(key) ?? []
    this.#answers.set(key, queue)
    return queue
  }
}
