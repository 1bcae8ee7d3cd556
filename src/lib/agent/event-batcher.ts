/** Timers as the batcher uses them; the real ones by default, a virtual clock in unit tests. */
export interface Timers {
  now(): number
  set(fn: () => void, ms: number): unknown
  clear(handle: unknown): void
}

export const realTimers: Timers = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, ms),
}

export interface EventBatcherOptions<E> {
  /** A batch is processed once this long passes with no new event (--batch-quiet, default 200 ms). */
  readonly quietMs: number
  /** …or this long after its first event, however busy it stays (--batch-max-wait, default 1 s). */
  readonly maxWaitMs: number
  /**
   * Whether an event after a quiet spell is processed at once (default true). Off, every event waits for
   * the quiet window, as a trailing-edge batcher does (--no-batch-leading-edge).
   */
  readonly leadingEdge?: boolean
  /** Processes one batch; batches never overlap. A rejection is the caller's to log (onError). */
  readonly process: (events: E[]) => Promise<void>
  readonly onError?: (error: unknown) => void
  readonly timers?: Timers
}

/**
 * Coalesces events into batches on timers, never by polling. An event that arrives after a quiet spell
 * is processed at once (leading edge: a lone device plug-in is not delayed); events that follow within
 * --batch-quiet gather into the next batch, which goes when they pause for --batch-quiet or, in a steady
 * stream, --batch-max-wait after its first event. Events that arrive while a batch is processed wait for
 * the next one.
 */
export class EventBatcher<E> {
  readonly #timers: Timers
  #pending: E[] = []
  #firstAt = 0
  #lastAt = 0
  #timer: unknown
  /** Until when a new event counts as part of a burst: the quiet window after the last event or batch. */
  #burstUntil = Number.NEGATIVE_INFINITY
  #running: Promise<void> | undefined
  /** A lone event arrived while an unrelated batch ran: it goes as soon as that batch is done. */
  #loneWaiting = false
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
    const lone = this.options.leadingEdge !== false && this.#pending.length === 0 && now >= this.#burstUntil
    if (this.#pending.length === 0) this.#firstAt = now
    this.#lastAt = now
    this.#burstUntil = now + this.options.quietMs
    this.#pending.push(event)
    if (lone && this.#running === undefined) this.#start()
    else if (lone) this.#loneWaiting = true
    else this.#schedule()
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

  /** When the pending batch is due: quiet after its last event, or max-wait after its first. */
  #dueAt(): number {
    return Math.min(this.#lastAt + this.options.quietMs, this.#firstAt + this.options.maxWaitMs)
  }

  #schedule(): void {
    this.#timers.clear(this.#timer)
    if (this.#running !== undefined || this.#pending.length === 0) return // rescheduled when the batch ends
    this.#timer = this.#timers.set(() => this.#start(), Math.max(0, this.#dueAt() - this.#timers.now()))
  }

  #start(): void {
    this.#timers.clear(this.#timer)
    if (this.#running !== undefined || this.#pending.length === 0 || this.#stopped) return
    const batch = this.#pending
    this.#pending = []
    this.#running = this.options.process(batch).catch((error: unknown) => this.options.onError?.(error)).finally(() => {
      this.#running = undefined
      const lone = this.#loneWaiting && this.#pending.length === 1
      this.#loneWaiting = false
      if (this.#pending.length > 0 && (lone || this.#timers.now() >= this.#dueAt())) this.#start()
      else this.#schedule()
    })
  }
}
