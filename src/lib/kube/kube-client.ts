import type * as http from 'node:http'
import type * as https from 'node:https'
import {createInterface} from 'node:readline'
import {urlToHttpOptions} from 'node:url'
import {setTimeout as sleep} from 'node:timers/promises'

import {AbortFanout} from '../abort.js'
import {AbortedError, ApiUnavailableError, errorMessage} from '../errors.js'
import {KubeApiError} from './api-error.js'
import {directHttpAgent} from './http-agent.js'
import {nodeHttp, nodeHttps} from '../node-http.js'
import {protobufContentType} from './protobuf-metadata.js'
import type {Credentials} from './credentials.js'
import {ConcurrencyWindow, type WindowStats} from './concurrency-window.js'
import {RateLimiter} from './rate-limiter.js'
import {defaultRetryPolicy, retryDelayMs, type RetryPolicy} from './retry-policy.js'

export interface KubeClientOptions {
  /** Client-side cap on requests per second (token bucket, as client-go); none when undefined. */
  readonly qps?: number
  readonly burst?: number
  /**
   * Most requests in flight at once (keep-alive sockets), and the ceiling of the concurrency window: below
   * it, the server's answers (429s from API Priority and Fairness, latency) decide how many are sent.
   */
  readonly maxConnections?: number
  /** Requests the concurrency window lets through before the server's first answers (default 8). */
  readonly initialConcurrency?: number
  readonly requestTimeoutMs?: number
  readonly retry?: RetryPolicy
  readonly random?: () => number
  /** The connection agent (proxies: see createHttpAgent); default a direct keep-alive agent with the credentials' TLS. */
  readonly agent?: http.Agent
}

export interface RequestOptions {
  readonly query?: Record<string, boolean | number | string | undefined>
  readonly accept?: string
  readonly body?: unknown
  readonly contentType?: string
  readonly signal?: AbortSignal
  /**
   * Told before each retry. A retry after a connection error means the earlier attempt may have reached
   * the server: a DELETE retried so and then answered 404 was most likely ours.
   */
  readonly onRetry?: (failure: 'network' | 'status') => void
  /** Skips the concurrency window: a lease renewal must not queue behind a throttled mass cleanup. */
  readonly critical?: boolean
}

export interface ClientStats {
  requests: number
  retries: number
}

interface OpenOptions {
  readonly accept?: string
  readonly body?: unknown
  readonly contentType?: string
  readonly signal?: AbortSignal
}

/**
 * REST access to one API server: rate limited, retried with back-off on 429/5xx/connection errors, and
 * counted. Speaks JSON over keep-alive HTTP(S) with the TLS material and credentials of a kubeconfig.
 */
export class KubeClient {
  readonly stats: ClientStats = {requests: 0, retries: 0}
  readonly server: URL
  readonly #agent: http.Agent
  readonly #limiter?: RateLimiter
  readonly #window: ConcurrencyWindow
  readonly #retry: RetryPolicy
  readonly #random: () => number
  readonly #timeoutMs: number
  readonly #aborts = new AbortFanout()
  readonly #transport: typeof http | typeof https
  /** Where requests go, as http.request options: worked out once from the server URL. */
  readonly #endpoint: Pick<http.RequestOptions, 'auth' | 'hostname' | 'port' | 'protocol'>
  readonly #prefix: string

  constructor(
    server: string,
    private readonly credentials: Credentials,
    options: KubeClientOptions,
  ) {
    this.server = new URL(server)
    if (options.qps !== undefined) this.#limiter = new RateLimiter(options.qps, options.burst ?? Math.max(1, Math.ceil(options.qps)))
    this.#window = new ConcurrencyWindow({initial: options.initialConcurrency, max: options.maxConnections ?? 64, min: 1})
    this.#retry = options.retry ?? defaultRetryPolicy
    this.#random = options.random ?? Math.random
    this.#timeoutMs = options.requestTimeoutMs ?? 60_000
    this.#agent = options.agent ?? directHttpAgent(this.server, credentials.tls, options.maxConnections ?? 64)
    this.#transport = this.server.protocol === 'https:' ? nodeHttps : nodeHttp
    const {auth, hostname, port, protocol} = urlToHttpOptions(this.server)
    this.#endpoint = {auth, hostname, port, protocol}
    this.#prefix = this.server.pathname.replace(/\/+$/, '')
  }

  /**
   * Sends one request (with retries) and returns the parsed JSON body; a Kubernetes protobuf body (asked for
   * with a protobuf Accept) comes back as its bytes, a text body (/readyz) as its text.
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const target = this.#target(path, options.query)
    let refreshedAuth = false
    let refreshAuth = false
    for (let attempt = 0; ; attempt++) {
      let response: {status: number; body: Buffer; contentType: string; retryAfter?: string}
      const leave = options.critical ? () => {} : await this.#window.enter(options.signal, method)
      try {
        response = await readAll(await this.#open(method, target, options, this.#timeoutMs, refreshAuth))
        leave(response.status === 429 ? 'throttled' : 'ok')
        refreshAuth = false
      } catch (error) {
        leave('none')
        if (options.signal?.aborted) throw aborted(method, path, options.signal, error)
        const delay = retryDelayMs(this.#retry, attempt, {kind: 'network'}, this.#random())
        if (delay === undefined) {
          throw new ApiUnavailableError(`${method} ${path} on ${this.server.origin} failed: ${describeNetworkError(error)}`, {cause: error})
        }
        options.onRetry?.('network')
        await this.#backOff(delay, method, path, options.signal)
        continue
      }
      if (response.status >= 200 && response.status < 300) {
        if (response.body.length === 0) return undefined as T
        if (response.contentType.startsWith(protobufContentType)) return response.body as T
        // /readyz and friends answer text/plain.
        const text = response.body.toString('utf8')
        return (response.contentType.includes('json') ? JSON.parse(text) : text) as T
      }
      const apiError = KubeApiError.fromResponse(method, path, response.status, response.body, response.retryAfter)
      if (apiError.statusClass === 'Unauthorized' && !refreshedAuth) {
        // An expired token: fetch fresh credentials once before giving up.
        refreshedAuth = true
        refreshAuth = true
        continue
      }
      const delay = retryDelayMs(this.#retry, attempt, {kind: 'status', retryAfterSeconds: apiError.retryAfterSeconds, statusClass: apiError.statusClass}, this.#random())
      if (delay === undefined) throw apiError
      options.onRetry?.('status')
      await this.#backOff(delay, method, path, options.signal)
    }
  }

  /**
   * Opens a watch; resolves once the server accepted it (200) with the stream of its events, parsed, until
   * the server ends it. A non-2xx answer throws KubeApiError; no retries here: the informer owns
   * reconnects, so it can log state changes.
   */
  async openWatch(path: string, options: {query?: RequestOptions['query']; accept?: string; signal?: AbortSignal; timeoutMs: number}): Promise<AsyncGenerator<unknown>> {
    const response = await this.#open('GET', this.#target(path, options.query), options, options.timeoutMs, false)
    if (response.statusCode !== 200) {
      const {body, retryAfter, status} = await readAll(response)
      throw KubeApiError.fromResponse('GET', path, status, body, retryAfter)
    }
    return events(response)
  }

  /** 429s seen and the concurrency window's current, lowest and highest size. */
  get window(): Readonly<WindowStats> {
    return this.#window.stats
  }

  /** Releases the keep-alive sockets. Idempotent. */
  close(): void {
    this.#agent.destroy()
  }

  /**
   * The request target: the server URL may carry a path prefix (Rancher, API proxies), and API paths go
   * below it, not over it. A string, not a URL object: a mass cleanup sends thousands of requests, and a URL
   * parsed and turned back into request options for each was a measurable part of the client's CPU.
   */
  #target(path: string, query: RequestOptions['query']): string {
    let search = ''
    if (query !== undefined) {
      const params = new URLSearchParams()
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') params.set(k, String(v))
      const text = params.toString()
      if (text !== '') search = `?${text}`
    }
    return this.#prefix + path + search
  }

  /** One rate-limited, counted HTTP exchange up to the response headers; the body is the caller's to read. */
  async #open(method: string, target: string, options: OpenOptions, timeoutMs: number, refreshAuth: boolean): Promise<http.IncomingMessage> {
    await this.#limiter?.acquire(options.signal)
    this.stats.requests++
    // Impersonate-Group and Impersonate-Extra-* may repeat: arrays become one header line per value.
    const headers: Record<string, string | string[]> = {
      ...(await this.credentials.headers(refreshAuth)),
      Accept: options.accept ?? 'application/json',
      'User-Agent': 'nfdctl',
    }
    let payload: string | undefined
    if (options.body !== undefined) {
      payload = JSON.stringify(options.body)
      headers['Content-Type'] = options.contentType ?? 'application/json'
      headers['Content-Length'] = String(Buffer.byteLength(payload))
    }
    return new Promise((resolve, reject) => {
      const req = this.#transport.request({...this.#endpoint, agent: this.#agent, headers, method, path: target}, resolve)
      req.on('error', reject)
      this.#bound(req, timeoutMs, options.signal)
      req.end(payload)
    })
  }

  /**
   * Ends an exchange, request and whole response body, when it outlives its timeout or the caller's signal
   * aborts. Not AbortSignal.timeout + AbortSignal.any per request: those keep a timer and two signals alive
   * for the whole timeout, long after the answer came, and a mass cleanup then fills the old generation
   * with them (measured: 20 MB more peak heap over 4,000 DELETEs). And not http's own `signal` option: it
   * adds one listener per request in flight to a sweep's shared signal.
   */
  #bound(req: http.ClientRequest, timeoutMs: number, signal: AbortSignal | undefined): void {
    const timer = setTimeout(() => req.destroy(timeoutError(timeoutMs)), timeoutMs)
    let untrack = (): void => {}
    if (signal?.aborted) req.destroy(abortReason(signal))
    else if (signal) untrack = this.#aborts.add(signal, () => req.destroy(abortReason(signal)))
    req.once('close', () => {
      clearTimeout(timer)
      untrack()
    })
  }

  async #backOff(delayMs: number, method: string, path: string, signal?: AbortSignal): Promise<void> {
    this.stats.retries++
    await sleep(delayMs, undefined, {signal}).catch((error: unknown) => {
      throw aborted(method, path, signal, error)
    })
  }
}

/** The whole response body. Events, not `for await`: an async iterator per response is garbage a mass cleanup makes thousands of. */
function readAll(response: http.IncomingMessage): Promise<{status: number; body: Buffer; contentType: string; retryAfter?: string}> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
    }
    response.on('data', onData)
    response.once('error', reject)
    // Destroyed before its end (timeout, abort): 'close' without 'end'.
    response.once('close', () => {
      if (!response.complete) reject(response.errored ?? new Error('the connection closed before the whole answer came'))
    })
    response.once('end', () => {
      const retryAfter = response.headers['retry-after']
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      // The response outlives its answer: under Node 26 each keep-alive TLS socket keeps the request it was
      // opened for, and so this response and its listeners, for as long as the socket lives (docs/upstream-facts.md).
      // Its chunks must not stay with it: in `gc run`, a first page of 500 labelled Nodes is 5.7 MB of them.
      chunks.length = 0
      response.off('data', onData)
      resolve({
        body,
        contentType: response.headers['content-type'] ?? '',
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        status: response.statusCode ?? 0,
      })
    })
  })
}

async function* events(response: http.IncomingMessage): AsyncGenerator<unknown> {
  const lines = createInterface({crlfDelay: Number.POSITIVE_INFINITY, input: response})
  try {
    for await (const line of lines) if (line.trim() !== '') yield JSON.parse(line) as unknown
  } finally {
    lines.close()
    response.destroy()
  }
}

function timeoutError(timeoutMs: number): Error {
  const error = new Error(`no complete answer within ${timeoutMs / 1000} s`)
  error.name = 'TimeoutError'
  return error
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('cancelled', {cause: signal.reason})
}

function aborted(method: string, path: string, signal: AbortSignal | undefined, cause: unknown): Error {
  const reason: unknown = signal?.reason
  if (reason instanceof Error && reason.name === 'TimeoutError') return new AbortedError(`timed out during ${method} ${path}`, {cause})
  return new AbortedError(`cancelled during ${method} ${path}`, {cause})
}

function describeNetworkError(error: unknown): string {
  const code = (error as {code?: string}).code
  if (error instanceof Error && error.name === 'TimeoutError') return 'request timed out'
  return code ? `${code} (${errorMessage(error)})` : errorMessage(error)
}
