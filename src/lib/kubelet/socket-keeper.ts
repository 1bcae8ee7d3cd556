import {watch, type FSWatcher} from 'node:fs'

import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import type {SupervisionPolicy} from '../source-health.js'
import type {SourceReport, SourceSupervisor} from '../source-supervisor.js'

/** A server on a unix socket that kubelet calls (a device plugin, a DRA plugin). */
export interface KeptSocket {
  /** Binds (again), a stale socket file removed first. */
  serve(): Promise<void>
  /** Whether the socket files on disk are still the ones bound (kubelet deletes them when it starts). */
  isServing(): Promise<boolean>
  /** Stops serving and removes the socket files that are still ours. */
  close(): Promise<void>
}

/** A plugin that registers itself with kubelet (device plugins); a DRA plugin is found by kubelet instead. */
export interface KubeletRegistrar {
  /** The running kubelet's identity (its registration socket's inode), undefined while none runs. */
  kubelet(): Promise<number | undefined>
  register(): Promise<void>
}

/** Where a kept socket is; logged by its owner once per change. `register failed` also covers a failed serve. */
export type KeeperState = 'serving' | 'registered' | 'kubelet absent' | 'register failed'

/**
 * Who tries again after a failure: a SourceSupervisor, under `name` and with its policy (the agent's DRA
 * sockets: given up on, the agent exits 1; the device plugins: a policy that never gives up).
 */
export interface KeeperRestarts {
  readonly supervisor: SourceSupervisor
  readonly name: string
  readonly policy?: SupervisionPolicy
}

export interface SocketKeeperOptions {
  readonly socket: KeptSocket
  readonly registrar?: KubeletRegistrar
  /** Directories whose changes may mean a socket deleted or a kubelet restarted. */
  readonly watch: readonly string[]
  readonly restarts: KeeperRestarts
  readonly logger: Logger
  /** The state changed (told once per change, as it is logged); `err` names the failure that changed it. */
  readonly onState?: (state: KeeperState, detail: {readonly err?: string; readonly step?: 'serve' | 'register'}) => void
  /** A socket served before is gone (deleted by kubelet or anyone): it is served again now. */
  readonly onGone?: () => void
}

/**
 * Keeps one kubelet plugin socket: serve, then register; serve again when the socket file is gone (kubelet
 * deletes plugin sockets when it starts, an operator may wipe a directory), register again when kubelet's
 * socket is a new one. The watched directories trigger a check at once; a failure is reported to the
 * restarts, which check again after back-off. Checks run one at a time.
 */
export class SocketKeeper {
  #state: KeeperState = 'serving'
  /** The kubelet identity registered with; a kubelet restart makes a new one. */
  #registeredWith: number | undefined
  #served = false
  #queue: Promise<unknown> = Promise.resolve()
  readonly #watchers: FSWatcher[] = []
  readonly #report: SourceReport
  /** Closed: it never serves or registers again. */
  #closed = false

  constructor(readonly options: SocketKeeperOptions) {
    const {name, policy, supervisor} = options.restarts
    this.#report = supervisor.restartable(name, () => this.#enqueue(() => this.#keep()), policy)
  }

  get state(): KeeperState {
    return this.#state
  }

  /** Serves (and registers) now; a failure rejects and is not retried: a start-up that must fail loudly. */
  async keepNow(): Promise<void> {
    await this.#enqueue(() => this.#keep())
    this.#report.up()
  }

  /** Watches the directories, then keeps the socket; a failure is reported and retried. */
  start(): Promise<void> {
    for (const dir of this.options.watch) {
      if (this.#closed) break
      try {
        const watcher = watch(dir, () => void this.check())
        watcher.on('error', (error) => this.#cannotWatch(dir, error))
        this.#watchers.push(watcher)
      } catch (error) {
        this.#cannotWatch(dir, error)
      }
    }
    return this.check()
  }

  /** Serves again when the socket is gone, registers when the running kubelet does not know it. Never rejects. */
  check(): Promise<void> {
    return this.#enqueue(() => this.#keep()).then(
      () => this.#report.up(),
      (error: unknown) => this.#report.failed(error),
    )
  }

  /** Stops watching and retrying, then closes the socket (removed, which kubelet notices). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true
    for (const watcher of this.#watchers.splice(0)) watcher.close()
    // Before the first await: a plugin replaced (its class changed) takes the same name in the same call.
    this.options.restarts.supervisor.forget(this.options.restarts.name)
    await this.#queue
    await this.options.socket.close()
  }

  #enqueue(work: () => Promise<void>): Promise<void> {
    const run = this.#queue.then(work)
    this.#queue = run.catch(() => {})
    return run
  }

  async #keep(): Promise<void> {
    if (this.#closed) return
    const {registrar, socket} = this.options
    if (!(await socket.isServing())) {
      if (this.#served) this.options.onGone?.()
      try {
        await socket.serve()
      } catch (error) {
        this.#setState('register failed', {err: errorMessage(error), step: 'serve'})
        throw error
      }
      this.#served = true
      this.#registeredWith = undefined
      if (this.#state === 'registered') this.#setState('serving', {})
    }
    if (registrar === undefined) return
    const kubelet = await registrar.kubelet()
    if (kubelet !== undefined && kubelet === this.#registeredWith) return
    if (kubelet === undefined) {
      this.#setState('kubelet absent', {})
      throw new Error('kubelet is not running (no registration socket)')
    }
    try {
      await registrar.register()
    } catch (error) {
      this.#setState('register failed', {err: errorMessage(error), step: 'register'})
      throw error
    }
    this.#registeredWith = kubelet
    this.#setState('registered', {})
  }

  #setState(state: KeeperState, detail: {err?: string; step?: 'serve' | 'register'}): void {
    if (this.#state === state) return
    this.#state = state
    this.options.onState?.(state, detail)
  }

  #cannotWatch(dir: string, error: unknown): void {
    this.options.logger.error({dir, err: errorMessage(error)}, 'cannot watch a kubelet directory; a socket deleted there is served again only on the retry timer')
  }
}
