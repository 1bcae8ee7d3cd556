import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import {runningPids, type ContainerdClient, type RuntimeContainer, type RuntimeEvent} from '../runtime/containerd-client.js'
import type {SourceReport} from '../source-supervisor.js'
import type {AgentMetrics} from './agent-metrics.js'

export interface ContainerdFollowerOptions {
  readonly containerd: ContainerdClient
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** A container or task changed, or the stream (re)connected and the running tasks were listed again. */
  readonly onChange: (what: string) => void
  /** Told when the connection is made or lost (the agent's readiness). */
  readonly connection?: SourceReport
}

/** The events that can change which containers run: an exec's exit (payload id is the exec id) does not. */
export function changesContainers(event: Pick<RuntimeEvent, 'topic' | 'payload'>): boolean {
  const execExit = event.topic === '/tasks/exit' && event.payload?.id !== event.payload?.container_id
  return !execExit && /^\/(tasks\/(start|exit|delete)|containers\/(create|update|delete))$/.test(event.topic)
}

/** Pure: the running init processes after an event (by container id). */
export function runningAfter(running: Map<string, number>, event: Pick<RuntimeEvent, 'topic' | 'payload'>): void {
  const id = event.payload?.container_id
  if (typeof id !== 'string' || !changesContainers(event)) return
  if (event.topic === '/tasks/start' && typeof event.payload?.pid === 'number') running.set(id, event.payload.pid)
  else if (event.topic === '/tasks/exit' || event.topic === '/tasks/delete') running.delete(id)
}

/**
 * containerd's event stream, subscribed again with back-off (0.2 s doubling to 5 s) whenever it ends. The
 * running tasks are listed once per connection and then followed from the events: listing them asks every
 * task's shim for its state, which takes long while shims start and stop pods, and a hot-plug must not wait
 * for that. The container list is kept per `generation` (any container or task event starts a new one).
 * The connection state is the agent's readiness; a lost or regained connection is logged once.
 */
export class ContainerdFollower {
  #connected: boolean | undefined
  #unsubscribe: (() => void) | undefined
  #endSubscription: (() => void) | undefined
  #stopped = false
  readonly #reconnect = new RetryTimer({backoff: {baseMs: 200, maxMs: 5000}})
  #loop: Promise<void> | undefined
  /** Events that came while the running tasks were listed: applied to the list's answer. */
  #pending: RuntimeEvent[] | undefined
  #running = new Map<string, number>()
  #generation = 0
  /** The generation of each container's last event; every container's is at least that of the connection. */
  readonly #lastEvent = new Map<string, number>()
  #connectedAt = 0
  #containers: {generation: number; list: Promise<RuntimeContainer[]>} | undefined

  constructor(readonly options: ContainerdFollowerOptions) {}

  get connected(): boolean {
    return this.#connected === true
  }

  /** The generation of the container's last event (or of the connection, when later): a new one, something may have changed it. */
  touchedAt(containerId: string): number {
    return Math.max(this.#lastEvent.get(containerId) ?? 0, this.#connectedAt)
  }

  /** The running init processes' PIDs by container id, as of the last event. */
  get running(): ReadonlyMap<string, number> {
    return this.#running
  }

  /** Workload containers (labelled so by the CRI; sandboxes never hold devices), listed again only after an event. */
  containers(filters: readonly string[]): Promise<RuntimeContainer[]> {
    if (this.#containers?.generation !== this.#generation) {
      const list = this.options.containerd.listContainers([...filters])
      this.#containers = {generation: this.#generation, list}
      // A failed list is asked again by the next batch (unless a newer one has taken its place).
      list.catch(() => {
        if (this.#containers?.list === list) this.#containers = undefined
      })
    }
    return this.#containers.list
  }

  start(signal: AbortSignal): void {
    this.#loop = this.#follow(signal)
  }

  async stop(): Promise<void> {
    this.#stopped = true
    this.#reconnect.stop()
    // Cancelling the stream does not report an end: wake the loop ourselves.
    this.#unsubscribe?.()
    this.#endSubscription?.()
    await this.#loop
  }

  #event(event: RuntimeEvent): void {
    if (!changesContainers(event)) return
    this.#generation++
    // Task events name the container in container_id, container events in id.
    const id = event.payload?.container_id ?? event.payload?.id
    if (typeof id === 'string') {
      if (event.topic === '/containers/delete') this.#lastEvent.delete(id)
      else this.#lastEvent.set(id, this.#generation)
    }
    if (this.#pending !== undefined) this.#pending.push(event)
    else runningAfter(this.#running, event)
    this.options.onChange(event.topic)
  }

  async #follow(signal: AbortSignal): Promise<void> {
    const {containerd} = this.options
    while (!signal.aborted && !this.#stopped) {
      const error = await new Promise<Error>((resolve) => {
        this.#endSubscription = () => resolve(new Error('agent stopped'))
        containerd
          .subscribe((event) => this.#event(event), resolve)
          .then(async (unsubscribe) => {
            // Stopped while subscribing: an open stream would keep the process alive.
            if (this.#stopped) {
              unsubscribe()
              resolve(new Error('agent stopped'))
              return
            }
            this.#unsubscribe = unsubscribe
            // No replay: list what runs now (events meanwhile are applied after), then follow the events.
            this.#pending = []
            try {
              const tasks = await containerd.listTasks()
              this.#running = runningPids(tasks)
              for (const event of this.#pending) runningAfter(this.#running, event)
            } catch (listError) {
              unsubscribe()
              resolve(new Error(`cannot list containerd's tasks: ${errorMessage(listError)}`))
              return
            } finally {
              this.#pending = undefined
            }
            this.#generation++
            this.#connectedAt = this.#generation
            this.#lastEvent.clear()
            this.#reconnect.succeeded()
            this.#setConnected(true)
            this.options.onChange('containerd connected')
          }, resolve)
      })
      if (signal.aborted || this.#stopped) return
      this.#setConnected(false, error)
      await this.#reconnect.wait(signal)
    }
  }

  #setConnected(up: boolean, error?: Error): void {
    if (this.#connected === up) return
    this.#connected = up
    const {address} = this.options.containerd.options
    if (up) {
      this.options.logger.info({address}, 'containerd connected')
      this.options.connection?.up()
    } else {
      this.options.connection?.failed(error ?? new Error('connection lost'))
      this.options.metrics.errors.inc({kind: 'containerd'})
      this.options.logger.warn({address, err: error?.message}, 'containerd connection lost; retrying with back-off')
    }
  }
}
