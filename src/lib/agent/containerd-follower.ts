import {setTimeout as sleep} from 'node:timers/promises'

import {Backoff} from '../backoff.js'
import type {Logger} from '../observe/logger.js'
import type {ContainerdClient, RuntimeEvent} from '../runtime/containerd-client.js'
import type {AgentMetrics} from './agent-metrics.js'

export interface ContainerdFollowerOptions {
  readonly containerd: ContainerdClient
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /**
   * A container or task changed, or the stream (re)connected: the stream has no replay, so a connect means
   * "list everything again".
   */
  readonly onChange: (what: string) => void
}

/** The events that can change which containers run: an exec's exit (payload id is the exec id) does not. */
export function changesContainers(event: Pick<RuntimeEvent, 'topic' | 'payload'>): boolean {
  const execExit = event.topic === '/tasks/exit' && event.payload?.id !== event.payload?.container_id
  return !execExit && /^\/(tasks\/(start|exit|delete)|containers\/(create|update|delete))$/.test(event.topic)
}

/**
 * containerd's event stream, subscribed again with back-off (0.2 s doubling to 5 s) whenever it ends. Its
 * connection state is the agent's readiness; a lost or regained connection is logged once.
 */
export class ContainerdFollower {
  #connected: boolean | undefined
  #unsubscribe: (() => void) | undefined
  #endSubscription: (() => void) | undefined
  #stopped = false
  #loop: Promise<void> | undefined

  constructor(readonly options: ContainerdFollowerOptions) {}

  get connected(): boolean {
    return this.#connected === true
  }

  start(signal: AbortSignal): void {
    this.#loop = this.#follow(signal)
  }

  async stop(): Promise<void> {
    this.#stopped = true
    // Cancelling the stream does not report an end: wake the loop ourselves.
    this.#unsubscribe?.()
    this.#endSubscription?.()
    await this.#loop
  }

  async #follow(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff({baseMs: 200, maxMs: 5000})
    const {containerd, onChange} = this.options
    while (!signal.aborted && !this.#stopped) {
      const error = await new Promise<Error>((resolve) => {
        this.#endSubscription = () => resolve(new Error('agent stopped'))
        containerd.subscribe((event) => {
          if (changesContainers(event)) onChange(event.topic)
        }, resolve).then((unsubscribe) => {
          // Stopped while subscribing: an open stream would keep the process alive.
          if (this.#stopped) {
            unsubscribe()
            resolve(new Error('agent stopped'))
            return
          }
          this.#unsubscribe = unsubscribe
          backoff.reset()
          this.#setConnected(true)
          onChange('containerd connected')
        }, resolve)
      })
      if (signal.aborted || this.#stopped) return
      this.#setConnected(false, error)
      await sleep(backoff.next(), undefined, {signal}).catch(() => {})
    }
  }

  #setConnected(up: boolean, error?: Error): void {
    if (this.#connected === up) return
    this.#connected = up
    const {address} = this.options.containerd.options
    if (up) this.options.logger.info({address}, 'containerd connected')
    else {
      this.options.metrics.errors.inc({kind: 'containerd'})
      this.options.logger.warn({address, err: error?.message}, 'containerd connection lost; retrying with back-off')
    }
  }
}
