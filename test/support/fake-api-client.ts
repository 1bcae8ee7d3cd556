import {KubeApiError} from '../../src/lib/kube/api-error.js'

/**
 * The API server's answers to single requests, without an API server: the test queues an answer (an
 * object, or a status code that becomes the KubeApiError the real client throws) per `METHOD path`; every
 * request is recorded. A request with nothing queued is a 503.
 */
export class FakeApiClient {
  readonly requests: string[] = []
  readonly #answers = new Map<string, Array<{object: unknown} | {code: number}>>()

  answer(method: string, path: string, object: unknown): void {
    this.#queue(`${method} ${path}`).push({object})
  }

  fail(method: string, path: string, code: number): void {
    this.#queue(`${method} ${path}`).push({code})
  }

  async request<T>(method: string, path: string): Promise<T> {
    const key = `${method} ${path}`
    this.requests.push(key)
    const next = this.#answers.get(key)?.shift() ?? {code: 503}
    if ('code' in next) throw new KubeApiError(method, path, next.code, `fake status ${next.code}`)
    return next.object as T
  }

  #queue(key: string): Array<{object: unknown} | {code: number}> {
    const queue = this.#answers.get(key) ?? []
    this.#answers.set(key, queue)
    return queue
  }
}
