import {Backoff, backoffMs, type BackoffPolicy} from './backoff.js'
import type {Timers} from './event-batcher.js'

/** The timers a RetryTimer sets: the real ones by default, a virtual clock in unit tests. */
export type RetryTimers = Pick<Timers, 'clear' | 'set'>

// Unref'd: what is retried keeps the process alive (a socket, a stream), never its next attempt.
const realTimers: RetryTimers = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  set: (fn, ms) => setTimeout(fn, ms).unref(),
}

export interface RetryTimerOptions {
  readonly backoff: BackoffPolicy
  /** For the policy's jitter (default Math.random). */
  readonly random?: () => number
  readonly timers?: RetryTimers
}

/**
 * The next attempt at something that failed (a write, a read, a reconnect), after the shared back-off
 * (backoff.ts): failed() schedules it, succeeded() starts the back-off over, stop() cancels what is
 * scheduled and refuses more. One attempt is scheduled at a time. For a loop that retries by itself,
 * wait() is the same back-off as a promise. What must show in /readyz, or fail the process when it cannot
 * come back, is a source of SourceSupervisor instead.
 */
export class RetryTimer {
  readonly #backoff: Backoff
  readonly #timers: RetryTimers
  #handle: unknown
  /** Told whether the scheduled attempt ran (false: cancelled). */
  #pending: ((ran: boolean) => void) | undefined
  #stopped = false

  constructor(readonly options: RetryTimerOptions) {
    for (const key of ['baseMs', 'maxMs'] as const) {
      const ms = options.backoff[key]
      if (!(Number.isFinite(ms) && ms >= 0)) throw new RangeError(`Expected \`${key}\` to be a finite number >= 0, got ${ms}`)
    }
    this.#backoff = new Backoff(options.backoff)
    this.#timers = options.timers ?? realTimers
  }

  /** Failures since the last success. */
  get failures(): number {
    return this.#backoff.failures
  }

  /** An attempt is scheduled and has not run yet. */
  get pending(): boolean {
    return this.#pending !== undefined
  }

  /**
   * Counts a failure and runs `retry` after the back-off, in place of an attempt scheduled before.
   * Returns the wait in ms (for the log); 0 once stopped, when nothing is scheduled.
   */
  failed(retry: () => void): number {
    if (this.#stopped) return 0
    this.cancel()
    const waitMs = this.#next()
    this.#schedule(waitMs, (ran) => {
      if (ran) retry()
    })
    return waitMs
  }

  /** The next attempt starts from the base again; one already scheduled still runs. */
  succeeded(): void {
    this.#backoff.reset()
  }

  /** Drops the scheduled attempt, if any; later failures schedule again. */
  cancel(): void {
    const pending = this.#pending
    if (pending === undefined) return
    this.#timers.clear(this.#handle)
    this.#handle = undefined
    this.#pending = undefined
    pending(false)
  }

  /** Cancels the scheduled attempt (a wait() resolves false) and schedules no more. Idempotent. */
  stop(): void {
    this.#stopped = true
    this.cancel()
  }

  /**
   * Counts a failure and resolves after the back-off: true then, false at once when `signal` aborts or the
   * timer is stopped or cancelled. `failures`: the failures in a row when the caller counts them itself (a
   * pure state machine); the timer's own count is then left alone.
   */
  wait(signal: AbortSignal, failures?: number): Promise<boolean> {
    if (this.#stopped || signal.aborted) return Promise.resolve(false)
    const waitMs = failures === undefined ? this.#next() : backoffMs(this.options.backoff, failures, this.#random())
    return new Promise((resolve) => {
      const abort = (): void => this.cancel()
      this.cancel()
      this.#schedule(waitMs, (ran) => {
        signal.removeEventListener('abort', abort)
        resolve(ran)
      })
      signal.addEventListener('abort', abort, {once: true})
    })
  }

  /** Runs `done(true)` after `waitMs`, or `done(false)` when cancelled first. */
  #schedule(waitMs: number, done: (ran: boolean) => void): void {
    this.#pending = done
    this.#handle = this.#timers.set(() => {
      this.#pending = undefined
      this.#handle = undefined
      done(!this.#stopped)
    }, waitMs)
  }

  #next(): number {
    return this.#backoff.next(this.#random())
  }

  #random(): number | undefined {
    return this.options.backoff.jitter === undefined ? undefined : (this.options.random ?? Math.random)()
  }
}
