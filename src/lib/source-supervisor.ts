import {errorMessage, ExitCode, NfdctlError} from './errors.js'
import {noopLogger, type Logger} from './observe/logger.js'
import {describeSource, retryDelayMs, sourceFailed, sourceUp, startingSource, type SourceState, type SupervisionPolicy} from './source-health.js'

/**
 * A source restarted on this node's own resources (a socket, a file): 1 s doubling to 30 s, given up on after
 * two minutes of failing (the process then exits 1 and its DaemonSet starts it again), and a run of failures
 * ends once the source has stayed up for a minute.
 */
const restartPolicy: SupervisionPolicy = {backoff: {baseMs: 1000, maxMs: 30_000}, giveUpAfterMs: 120_000, stableMs: 60_000}

/**
 * A source whose own loop reconnects (containerd's events, the API server's watches) or that waits for the
 * API server: only shown, never given up on, since a restart of the process brings neither back.
 */
export const followPolicy: SupervisionPolicy = {backoff: {baseMs: 1000, maxMs: 30_000}, stableMs: 60_000}

/** What a source tells its supervisor. */
export interface SourceReport {
  /** It works (again). */
  up(): void
  /** It failed; a restartable source is restarted after back-off, or given up on. */
  failed(error: unknown): void
}

/** A source could not come back: the process exits 1 so that its supervisor (the DaemonSet) starts it again. */
export class SourceFailedError extends NfdctlError {
  constructor(
    readonly source: string,
    message: string,
  ) {
    super(message, ExitCode.failed)
  }
}

export interface SourceSupervisorOptions {
  readonly logger?: Logger
  /** Milliseconds, for the failure runs (tests and the clock are the same thing here). */
  readonly now?: () => number
}

interface Supervised {
  state: SourceState
  readonly policy: SupervisionPolicy
  readonly restart?: () => Promise<void>
  timer?: NodeJS.Timeout
}

/**
 * The one owner of restarts: every source the agent depends on reports here whether it works; a source
 * this supervisor restarts is retried with the shared back-off, and one that cannot come back (its run of
 * failures outlasts its policy) aborts `fatal` with a SourceFailedError naming it and its last error. The
 * command awaits `fatal` and exits 1; nothing here exits. status() says which sources are down, for /readyz.
 */
export class SourceSupervisor {
  readonly #fatal = new AbortController()
  readonly #sources = new Map<string, Supervised>()
  readonly #log: Logger
  readonly #now: () => number
  #stopped = false

  constructor(readonly options: SourceSupervisorOptions = {}) {
    this.#log = options.logger ?? noopLogger
    this.#now = options.now ?? Date.now
  }

  /** Aborted, with a SourceFailedError as its reason, when a source is given up on. */
  get fatal(): AbortSignal {
    return this.#fatal.signal
  }

  /** A source restarted here: after a failure, `restart` runs after back-off (again after each failure) until it resolves. */
  restartable(name: string, restart: () => Promise<void>, policy: SupervisionPolicy = restartPolicy): SourceReport {
    return this.#add(name, {policy, restart, state: startingSource})
  }

  /** A source that reconnects by itself (or is retried by its owner): only its state is kept, for /readyz. */
  followed(name: string, policy: SupervisionPolicy = followPolicy): SourceReport {
    return this.#add(name, {policy, state: startingSource})
  }

  /** The source's state now (tests, metrics). */
  state(name: string): SourceState | undefined {
    return this.#sources.get(name)?.state
  }

  /** Ready while every source is up; the reason lists the ones that are not, each with since when and its last error. */
  status(): {ready: boolean; reason: string} {
    const now = this.#now()
    const down = [...this.#sources].flatMap(([name, s]) => describeSource(name, s.state, now) ?? [])
    if (down.length > 0) return {ready: false, reason: down.join('; ')}
    return {ready: true, reason: `up: ${[...this.#sources.keys()].join(', ')}`}
  }

  /** The source is gone for good (a class's plugin retired): its restart, if one is waiting, never runs, and its name is free again. */
  forget(name: string): void {
    const source = this.#sources.get(name)
    if (source === undefined) return
    clearTimeout(source.timer)
    source.state = {phase: 'stopped'}
    this.#sources.delete(name)
  }

  /** No more restarts; what sources say from now on is ignored. Idempotent. */
  stop(): void {
    this.#stopped = true
    for (const source of this.#sources.values()) {
      clearTimeout(source.timer)
      source.state = {phase: 'stopped'}
    }
  }

  #add(name: string, source: Supervised): SourceReport {
    if (this.#sources.has(name)) throw new Error(`source ${name} is supervised already`)
    this.#sources.set(name, source)
    return {
      failed: (error) => this.#failed(name, source, errorMessage(error)),
      up: () => this.#up(name, source),
    }
  }

  #up(name: string, source: Supervised): void {
    if (this.#stopped) return
    const was = source.state
    source.state = sourceUp(was, this.#now())
    if (was.phase === 'down' && source.restart !== undefined) this.#log.info({source: name}, `${name} is back`)
  }

  #failed(name: string, source: Supervised, error: string): void {
    if (this.#stopped) return
    const was = source.state
    const now = this.#now()
    source.state = sourceFailed(was, error, now, source.policy)
    const {state} = source
    if (state.phase === 'given-up') {
      clearTimeout(source.timer)
      const seconds = Math.round((now - state.since) / 1000)
      this.#fatal.abort(new SourceFailedError(name, `${name} cannot come back: ${state.failures} failures in ${seconds} s, the last: ${error}`))
      return
    }
    if (source.restart === undefined || source.timer !== undefined) return
    const delay = retryDelayMs(state, source.policy) ?? source.policy.backoff.baseMs
    if (was.phase !== 'down') this.#log.warn({err: error, retryInMs: delay, source: name}, `${name} failed; restarting with back-off`)
    const restart = source.restart
    source.timer = setTimeout(() => {
      source.timer = undefined
      if (this.#stopped) return
      restart().then(
        () => this.#up(name, source),
        (restartError: unknown) => this.#failed(name, source, errorMessage(restartError)),
      )
    }, delay).unref() // the sources keep the process alive, not their restarts
  }
}
