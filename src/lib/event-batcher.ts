/** Timers as the batcher uses them; the real ones by default, a virtual clock in unit tests. */
export interface Timers {
  now(): number
  set(fn: () => void, ms: number): unknown
  clear(handle: unknown): void
}

const realTimers: Timers = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, ms),
}

export interface EventBatcherOptions<E> {
  /** Processes one batch; batches never overlap. A rejection is the caller's to log (onError). */
  readonly process: (events: E[]) => Promise<void>
  /**
   * An optional minimum delay: a batch waits until events pause this long (0, the default: it does not
   * wait). For callers that would rather see a burst whole than act on its first event.
   */
  readonly quietMs?: number
  /** With quietMs: a batch waits at most this long after its first event, however busy it stays. */
  readonly maxWaitMs?: number
  readonly onError?: (error: unknown) => void
  readonly timers?: Timers
}

/**
 * Group commit: an event that finds no batch running is processed at once (with the others of the same
 * tick), so a lone hot-plug never waits for a window; events that arrive while a batch runs are coalesced
 * into the next batch, which starts as soon as the running one ends. A burst of any size is so a handful
 * of batches, each as large as the work it waited behind. No polling: timers only with a quiet window.
 */
export class EventBatcher<E> {
  readonly #timers: Timers
  #pending: E[] = []
  #firstAt = 0
  #lastAt = 0
  #timer: unknown
  #startQueued = false
  #running: Promise<void> | undefined
  #stopped = false

  constructor(readonly options: EventBatcherOptions<E>) {
    this.#timers = options.timers ?? realTimers
  }

  /** True while events wait or a batch is being processed. */
  get busy(): boolean {
    return this.#pending.length > 0 || this.#running !== undefined
  }

  add(event: E): void {
    if (this.#stopped) return
    const now = this.#timers.now()
    if (this.#pending.length === 0) this.#firstAt = now
    this.#lastAt = now
    this.#pending.push(event)
    if (this.#running === undefined) this.#next()
  }

  /** Processes what is pending now and waits for it (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.busy) {
      if (this.#running === undefined) this.#start()
      await this.#running
    }
  }

  /** Drops pending events and the timer; a batch being processed finishes. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#timers.clear(this.#timer)
    this.#pending = []
    await this.#running
  }

  /** Starts the next batch: after this tick's events without a quiet window, else once events pause. */
  #next(): void {
    this.#timers.clear(this.#timer)
    if (this.#pending.length === 0) return
    const quietMs = this.options.quietMs ?? 0
    if (quietMs <= 0) {
      if (this.#startQueued) return
      this.#startQueued = true
      queueMicrotask(() => {
        this.#startQueued = false
        this.#start()
      })
      return
    }
    const waitMs = Math.min(this.#lastAt + quietMs, this.#firstAt + (this.options.maxWaitMs ?? Number.POSITIVE_INFINITY)) - this.#timers.now()
    if (waitMs <= 0) this.#start()
    else this.#timer = this.#timers.set(() => this.#start(), waitMs)
  }

  #start(): void {
    this.#timers.clear(this.#timer)
    if (this.#running !== undefined || this.#pending.length === 0 || this.#stopped) return
    const batch = this.#pending
    this.#pending = []
    this.#running = this.options
      .process(batch)
      .catch((error: unknown) => this.options.onError?.(error))
      .finally(() => {
        this.#running = undefined
        if (!this.#stopped) this.#next()
      })
  }
}
