import {errorMessage} from '../errors.js'
import type {KeptSocket} from '../kubelet/socket-keeper.js'
import type {Logger} from '../observe/logger.js'
import type {DraMetrics} from './dra-metrics.js'
import {draDriver} from './resource-slices.js'

export interface DraRegistrationOptions {
  readonly logger: Logger
  readonly metrics: DraMetrics
  /** kubelet registered the driver (again): a kubelet that (re)starts deletes the node's slices. */
  readonly onRegistered: () => void
}

/**
 * The driver's registration with kubelet, which finds the plugin's registration socket itself and tells its
 * word through NotifyRegistrationStatus: ready once registered, not ready again while the sockets are
 * served anew (kubelet then registers the driver again).
 */
export class DraRegistration {
  #registered: boolean | undefined

  constructor(readonly options: DraRegistrationOptions) {}

  /** Ready once kubelet has registered the driver. */
  status(): {ready: boolean; reason: string} {
    if (this.#registered === true) return {ready: true, reason: `DRA driver ${draDriver} registered`}
    return {ready: false, reason: `DRA driver ${draDriver}: ${this.#registered === false ? 'kubelet refused the registration' : 'waiting for kubelet to register it'}`}
  }

  /** kubelet's word on the registration. */
  registered(ok: boolean, error: string): void {
    const {logger, metrics} = this.options
    const was = this.#registered
    this.#registered = ok
    metrics.registered.set(ok ? 1 : 0)
    if (ok) {
      if (was !== true) logger.info({}, `DRA driver ${draDriver}: registered with kubelet`)
      this.options.onRegistered()
    } else logger.warn({err: error}, `DRA driver ${draDriver}: kubelet refused the registration`)
  }

  /**
   * The plugin server as the socket keeper serves it: each serve waits for kubelet's word again, and a
   * failure is counted and named (the supervisor's /readyz line and its last error).
   */
  keptSocket(server: KeptSocket): KeptSocket {
    return {
      close: () => server.close(),
      isServing: () => server.isServing(),
      serve: async () => {
        this.#registered = undefined
        try {
          await server.serve()
        } catch (error) {
          this.options.metrics.errors.inc({kind: 'serve'})
          throw new Error(`cannot serve the DRA plugin: ${errorMessage(error)}`, {cause: error})
        }
      },
    }
  }
}
