import {errorMessage} from '../errors.js'
import type {Timers} from '../event-batcher.js'
import {noopLogger, type Logger} from '../observe/logger.js'
import {isStatus} from './api-error.js'
import type {KubeClient} from './kube-client.js'
import {decideLease, microTime, type LeaseRecord} from './lease-decision.js'

/** What leader election asks of the API server: single requests on the Lease. */
export type LeaseClient = Pick<KubeClient, 'request'>

export interface LeaderElectorOptions {
  readonly client: LeaseClient
  readonly namespace: string
  readonly name: string
  readonly identity: string
  readonly leaseDurationMs: number
  readonly renewDeadlineMs: number
  readonly retryPeriodMs: number
  readonly logger?: Logger
  /** Called when this replica becomes leader; the work it starts must stop when `signal` aborts. */
  readonly onStartedLeading: (signal: AbortSignal) => Promise<void> | void
  /** Called when leadership is lost or given up; awaited before the lease is released. */
  readonly onStoppedLeading: () => Promise<void> | void
  /** The monotonic clock of expiry decisions and the retry period's timer: the real ones by default, a virtual clock in unit tests. */
  readonly timers?: Timers
}

const realTimers: Timers = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, ms),
}

interface Lease {
  apiVersion: 'coordination.k8s.io/v1'
  kind: 'Lease'
  metadata: {name: string; namespace: string; resourceVersion?: string}
  spec: LeaseRecord & {acquireTime?: string; renewTime?: string}
}

type ElectorState = {phase: 'candidate' | 'idle' | 'stopped'} | {phase: 'leading'; controller: AbortController; renewedAtMs: number}

/**
 * Leader election on a coordination.k8s.io Lease, with client-go's semantics: acquire when the holder has not
 * renewed for a lease duration (on our clock), renew every retry period, step down when renewals fail for
 * the renew deadline, and release the lease on stop so a standby takes over at once.
 */
export class LeaderElector {
  #state: ElectorState = {phase: 'idle'}
  #observed?: {record: string; atMs: number}
  #lease?: Lease
  #loop?: Promise<void>
  #stopping?: Promise<void>
  #failing = false
  readonly #controller = new AbortController()
  readonly #log: Logger
  readonly #timers: Timers

  constructor(readonly options: LeaderElectorOptions) {
    if (!(options.leaseDurationMs > options.renewDeadlineMs)) throw new RangeError('Expected the lease duration to be longer than the renew deadline')
    if (!(options.renewDeadlineMs > options.retryPeriodMs)) throw new RangeError('Expected the renew deadline to be longer than the retry period')
    this.#log = options.logger ?? noopLogger
    this.#timers = options.timers ?? realTimers
  }

  get isLeader(): boolean {
    return this.#state.phase === 'leading'
  }

  /** False while lease rounds fail for reasons other than losing a race (no access, no API server). */
  get healthy(): boolean {
    return !this.#failing
  }

  /** Starts campaigning in the background; returns at once (readiness does not wait for leadership). */
  start(signal: AbortSignal): void {
    if (this.#loop) throw new Error('elector already started')
    if (signal.aborted) return
    signal.addEventListener('abort', () => void this.stop(), {once: true})
    this.#state = {phase: 'candidate'}
    this.#loop = this.#run()
  }

  /** Stops leading (awaiting onStoppedLeading), releases a held lease, ends the loop. Idempotent: every caller waits for the same stop. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop()
    return this.#stopping
  }

  async #stop(): Promise<void> {
    const wasLeading = this.#state.phase === 'leading'
    if (this.#state.phase === 'leading') this.#state.controller.abort()
    this.#state = {phase: 'stopped'}
    this.#controller.abort()
    await this.#loop
    if (wasLeading) {
      await this.options.onStoppedLeading()
      await this.#release()
    }
  }

  async #run(): Promise<void> {
    const signal = this.#controller.signal
    while (!signal.aborted) {
      const state = this.#state
      if (state.phase === 'leading') {
        // The round may not outlast the renew deadline: a hung request must not keep a stale leader deleting.
        const sentAt = this.#timers.now()
        const budget = Math.max(1, state.renewedAtMs + this.options.renewDeadlineMs - sentAt)
        const renewed = await this.#tryAcquireOrRenew(budget)
        if (signal.aborted) break
        if (renewed) {
          state.renewedAtMs = sentAt // the lease counts from when we asked, not from when the answer came
        } else if (this.#timers.now() - state.renewedAtMs >= this.options.renewDeadlineMs) {
          this.#log.warn({identity: this.options.identity, lease: this.options.name}, 'could not renew the leader lease in time; stepping down')
          state.controller.abort()
          this.#state = {phase: 'candidate'}
          await this.options.onStoppedLeading()
        }
      } else if (state.phase === 'candidate') {
        const sentAt = this.#timers.now()
        if (await this.#tryAcquireOrRenew(this.options.renewDeadlineMs)) {
          if (signal.aborted) break
          const controller = new AbortController()
          this.#state = {controller, phase: 'leading', renewedAtMs: sentAt}
          this.#log.info({identity: this.options.identity, lease: `${this.options.namespace}/${this.options.name}`}, 'became leader')
          void Promise.resolve(this.options.onStartedLeading(controller.signal)).catch((error: unknown) => {
            this.#log.error({err: errorMessage(error)}, 'leader work failed')
          })
        }
      }
      if (!(await this.#sleep(this.options.retryPeriodMs, signal))) break
    }
  }

  /** Resolves true after `ms`, false at once when `signal` aborts. */
  #sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false)
    return new Promise((resolve) => {
      const abort = (): void => {
        this.#timers.clear(handle)
        resolve(false)
      }
      const handle = this.#timers.set(() => {
        signal.removeEventListener('abort', abort)
        resolve(true)
      }, ms)
      signal.addEventListener('abort', abort, {once: true})
    })
  }

  /** One round: read the lease, and create, take over or renew it when we may. True when we hold it after. */
  async #tryAcquireOrRenew(budgetMs: number): Promise<boolean> {
    const {client, identity, namespace, name} = this.options
    const path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`
    // Monotonic time for expiry decisions: a wall-clock step must not make a live lease look expired.
    const now = this.#timers.now()
    const wallNow = Date.now()
    const signal = AbortSignal.any([this.#controller.signal, AbortSignal.timeout(Math.max(1, Math.ceil(budgetMs)))])
    try {
      let lease: Lease | undefined
      try {
        lease = await client.request<Lease>('GET', `${path}/${name}`, {critical: true, signal})
      } catch (error) {
        if (!isStatus(error, 'NotFound')) throw error
      }
      const recordKey = JSON.stringify(lease?.spec ?? null)
      if (this.#observed?.record !== recordKey) this.#observed = {atMs: now, record: recordKey}
      const decision = decideLease(lease?.spec, this.#observed.atMs, identity, now)
      if (decision === 'wait') return false
      const spec = {
        acquireTime: decision === 'renew' ? lease!.spec.acquireTime : microTime(wallNow),
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(this.options.leaseDurationMs / 1000),
        leaseTransitions: (lease?.spec.leaseTransitions ?? 0) + (decision === 'acquire' ? 1 : 0),
        renewTime: microTime(wallNow),
      }
      const body: Lease = {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name, namespace, resourceVersion: lease?.metadata.resourceVersion}, spec}
      // resourceVersion makes the update conditional: two candidates racing for an expired lease cannot both win.
      this.#lease =
        decision === 'create' ? await client.request<Lease>('POST', path, {body, critical: true, signal}) : await client.request<Lease>('PUT', `${path}/${name}`, {body, critical: true, signal})
      this.#observed = {atMs: now, record: JSON.stringify(this.#lease.spec)}
      this.#setFailing(false)
      return true
    } catch (error) {
      // Losing a race for the lease (409) is normal; anything else is logged once per state change.
      if (!this.#controller.signal.aborted && !isStatus(error, 'Conflict')) this.#setFailing(true, error)
      return false
    }
  }

  #setFailing(failing: boolean, error?: unknown): void {
    if (this.#failing === failing) return
    this.#failing = failing
    const lease = `${this.options.namespace}/${this.options.name}`
    if (failing) this.#log.warn({err: errorMessage(error), lease}, 'cannot read or update the leader lease; retrying')
    else this.#log.info({lease}, 'leader lease reachable again')
  }

  /** Gives the lease up so a standby need not wait for it to expire. */
  async #release(): Promise<void> {
    let lease = this.#lease
    if (!lease) return
    const {client, namespace, name, identity} = this.options
    const path = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`
    // Shutdown must not hang on an unreachable API server: the lease then simply expires.
    const deadline = AbortSignal.timeout(2000)
    try {
      for (let attempt = 0; ; attempt++) {
        const body: Lease = {...lease, spec: {...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(Date.now())}}
        try {
          await client.request('PUT', path, {body, critical: true, signal: deadline})
          this.#log.info({identity}, 'released the leader lease')
          return
        } catch (error) {
          // A renewal cut off by the shutdown may still have reached the server: the lease then has a newer
          // resourceVersion, still ours. Read it and release that one.
          if (!isStatus(error, 'Conflict') || attempt > 0) throw error
          const current = await client.request<Lease>('GET', path, {critical: true, signal: deadline})
          if (current.spec?.holderIdentity !== identity) return
          lease = current
        }
      }
    } catch (error) {
      this.#log.warn({err: errorMessage(error)}, 'could not release the leader lease; a standby takes over when it expires')
    }
  }
}
