import {AbortFanout} from '../abort.js'
import {AbortedError} from '../errors.js'

/**
 * How many requests may be in flight, decided by the server's answers (AIMD, as TCP does with its
 * congestion window): grow while answers come back fast, halve on a 429 (API Priority and Fairness says the
 * priority level is full), shrink a little when answers take clearly longer than this server needs at ease
 * (it is queueing us: more in flight would only add waiting, and memory, not throughput).
 */
export interface WindowState {
  /** Requests allowed in flight; fractional so that additive increase can add 1/limit per answer. */
  readonly limit: number
  /** Until the first cut the window doubles per round trip (slow start), then grows by 1 per window. */
  readonly slowStart: boolean
  /** Per kind of request (a list page is slower than a DELETE at any load): its latency at ease. */
  readonly baselines: Readonly<Record<string, Baseline>>
  /** When the window was last cut: one cut per cool-down, however many answers of the same burst say so. */
  readonly lastCutAt: number
}

/**
 * The lowest latency of the current and the previous period: a minimum, so load does not raise it, that
 * forgets, so a server that got slower for good is not cut forever.
 */
export interface Baseline {
  readonly current: number
  readonly previous: number
  readonly periodStart: number
}

export interface WindowOptions {
  readonly min: number
  readonly max: number
  /** Where slow start begins (default 8): a client that knows how much it will send may start higher. */
  readonly initial?: number
}

export type Answer =
  | {readonly kind: 'throttled'; readonly at: number}
  | {
      readonly kind: 'ok'
      readonly at: number
      readonly latencyMs: number
      /** The kind of request (its method): each has its own baseline. */
      readonly route?: string
      /**
       * Whether the window was at least half full when this request was sent. Only such answers grow it
       * (TCP grows its window only while using it): one list page after another says nothing about how
       * many requests the server takes at once.
       */
      readonly filled?: boolean
    }

/** Between two cuts: long enough for the answers to requests sent before the last cut to come back. */
export const cutCooldownMs = 250
export const baselinePeriodMs = 10_000
/**
 * Latency this many times the baseline, and this much above it, counts as the server queueing us. Not
 * tighter: measured on a real kube-apiserver + etcd, DELETEs still gain throughput up to about 64 in flight
 * (etcd batches more writes per commit) while their latency grows well past twice the unloaded one.
 */
const latencyFactor = 4
const latencyMarginMs = 100

export function initialWindow(options: WindowOptions, initial = options.initial ?? 8): WindowState {
  return {baselines: {}, lastCutAt: Number.NEGATIVE_INFINITY, limit: clamp(initial, options), slowStart: true}
}

export function baselineOf(state: WindowState, route = ''): number | undefined {
  const b = state.baselines[route]
  return b === undefined ? undefined : Math.min(b.current, b.previous)
}

/** The window after one answer. Pure. */
export function nextWindow(state: WindowState, answer: Answer, options: WindowOptions): WindowState {
  const coolingDown = answer.at - state.lastCutAt < cutCooldownMs
  if (answer.kind === 'throttled') {
    if (coolingDown) return state
    return {...state, lastCutAt: answer.at, limit: clamp(state.limit / 2, options), slowStart: false}
  }
  const {at, filled = true, latencyMs, route = ''} = answer
  const before = baselineOf(state, route)
  const baselines = {...state.baselines, [route]: nextBaseline(state.baselines[route], latencyMs, at)}
  if (before !== undefined && latencyMs > latencyFactor * before && latencyMs > before + latencyMarginMs) {
    if (coolingDown) return {...state, baselines}
    return {baselines, lastCutAt: at, limit: clamp(state.limit * 0.9, options), slowStart: false}
  }
  if (!filled) return {...state, baselines}
  const limit = clamp(state.limit + (state.slowStart ? 1 : 1 / state.limit), options)
  return {...state, baselines, limit}
}

function nextBaseline(b: Baseline | undefined, latencyMs: number, at: number): Baseline {
  if (b === undefined) return {current: latencyMs, periodStart: at, previous: Number.POSITIVE_INFINITY}
  if (at - b.periodStart >= baselinePeriodMs) return {current: latencyMs, periodStart: at, previous: b.current}
  return latencyMs < b.current ? {...b, current: latencyMs} : b
}

function clamp(limit: number, {max, min}: WindowOptions): number {
  return Math.min(max, Math.max(min, limit))
}

export interface WindowStats {
  /** 429 answers seen. */
  throttled: number
  /** Requests allowed in flight now, and the lowest and highest the window reached. */
  limit: number
  lowest: number
  highest: number
}

/** A gate in front of the transport that lets `floor(limit)` requests through at once. */
export class ConcurrencyWindow {
  #state: WindowState
  #inFlight = 0
  readonly #waiting: Array<{wake: () => void}> = []
  readonly #aborts = new AbortFanout()
  readonly stats: WindowStats

  constructor(
    private readonly options: WindowOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(options.min >= 1 && options.max >= options.min)) throw new RangeError(`Expected 1 <= min <= max, got ${options.min}..${options.max}`)
    this.#state = initialWindow(options)
    const limit = Math.floor(this.#state.limit)
    this.stats = {highest: limit, limit, lowest: limit, throttled: 0}
  }

  /** Waits for a place in the window; the returned function gives it back with the server's answer. */
  async enter(signal?: AbortSignal, route = ''): Promise<(answer: 'ok' | 'throttled' | 'none') => void> {
    while (this.#inFlight >= Math.floor(this.#state.limit)) {
      if (signal?.aborted) throw new AbortedError('cancelled while waiting for a request slot')
      await new Promise<void>((resolve) => {
        const waiter = {wake: resolve}
        if (signal) {
          // A cancelled waiter leaves the queue, so it does not take a wake-up meant for another.
          const stopListening = this.#aborts.add(signal, () => {
            this.#waiting.splice(this.#waiting.indexOf(waiter), 1)
            resolve()
          })
          waiter.wake = () => {
            stopListening()
            resolve()
          }
        }
        this.#waiting.push(waiter)
      })
    }
    this.#inFlight++
    const filled = 2 * this.#inFlight >= Math.floor(this.#state.limit)
    const sentAt = this.now()
    let left = false
    return (answer) => {
      if (left) return
      left = true
      this.#inFlight--
      if (answer !== 'none') this.#record(answer === 'throttled' ? {at: this.now(), kind: 'throttled'} : {at: this.now(), kind: 'ok', latencyMs: this.now() - sentAt, route, filled})
      this.#wake()
    }
  }

  #record(answer: Answer): void {
    if (answer.kind === 'throttled') this.stats.throttled++
    this.#state = nextWindow(this.#state, answer, this.options)
    const limit = Math.floor(this.#state.limit)
    this.stats.limit = limit
    this.stats.lowest = Math.min(this.stats.lowest, limit)
    this.stats.highest = Math.max(this.stats.highest, limit)
  }

  #wake(): void {
    let free = Math.floor(this.#state.limit) - this.#inFlight
    while (free-- > 0 && this.#waiting.length > 0) this.#waiting.shift()!.wake()
  }
}
