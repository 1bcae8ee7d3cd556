import {join} from 'node:path'

import {Backoff} from '../backoff.js'
import type {DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {healthy, unhealthy} from '../kubelet/device-plugin-api.js'
import {kubeletSocketIdentity, registerWithKubelet} from '../kubelet/registration.js'
import type {Logger} from '../observe/logger.js'
import {ClassAllocation} from './class-allocation.js'
import {ClassPluginServer} from './class-plugin-server.js'
import type {PluginMetrics} from './plugin-metrics.js'

export type PluginState = 'serving' | 'registered' | 'kubelet absent' | 'register failed'

export interface PluginRegistrationOptions {
  readonly server: ClassPluginServer
  /** kubelet's device-plugin directory: kubelet.sock and the plugins' sockets. */
  readonly pluginDir: string
  readonly metrics: PluginMetrics
  readonly logger: Logger
  /** Longest wait between attempts while kubelet does not answer; default 5 s. */
  readonly maxRetryMs?: number
}

/**
 * One class's plugin with kubelet: serve first, then register; serve again when kubelet deleted the socket
 * (it does when it starts), register again when kubelet.sock is a new one. Without kubelet, attempts are
 * retried with back-off. Checks are serialised, and the state is logged only when it changes.
 */
export class PluginRegistration {
  #state: PluginState = 'serving'
  /** The kubelet.sock identity registered with; a kubelet restart makes a new one. */
  #registeredWith: number | undefined
  #queue: Promise<void> = Promise.resolve()
  #retry: NodeJS.Timeout | undefined
  readonly #backoff: Backoff
  /** Shut down (its class went away or changed, or the set stops): it never serves or registers again. */
  #closed = false

  /** The plugin of a class: `devices.nfdctl.io/<class>` on `<plugin-dir>/nfdctl-<class>.sock`, naming CDI devices with `cdi`. */
  static ofClass(deviceClass: DeviceClass, options: Omit<PluginRegistrationOptions, 'server'> & {readonly cdi: boolean; readonly beforeAllocate?: () => Promise<void>}): PluginRegistration {
    const allocation = new ClassAllocation(deviceClass, options.cdi)
    const socket = join(options.pluginDir, `nfdctl-${deviceClass.metadata.name}.sock`)
    const server = new ClassPluginServer(allocation, socket, options.metrics, options.logger.child({class: deviceClass.metadata.name}), options.beforeAllocate)
    return new PluginRegistration({...options, server})
  }

  constructor(readonly options: PluginRegistrationOptions) {
    this.#backoff = new Backoff({baseMs: 100, maxMs: options.maxRetryMs ?? 5000})
  }

  get allocation(): ClassAllocation {
    return this.options.server.allocation
  }

  get name(): string {
    return this.allocation.name
  }

  get state(): PluginState {
    return this.#state
  }

  /** Sends the class's list to kubelet (ListAndWatch), and counts it. */
  push(): void {
    const {metrics, server} = this.options
    const listed = this.allocation.listAndWatch()
    metrics.devices.set({class: this.name, health: healthy}, listed.filter((d) => d.health === healthy).length)
    metrics.devices.set({class: this.name, health: unhealthy}, listed.filter((d) => d.health === unhealthy).length)
    server.push()
  }

  /** Serves again when our socket is gone, registers when the running kubelet does not know us. */
  check(): Promise<void> {
    this.#queue = this.#queue.then(() => this.#check())
    return this.#queue
  }

  /** Stops serving and retrying; its socket is removed, which kubelet notices. */
  async shutDown(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#retry)
    await this.#queue
    await this.options.server.close()
  }

  async #check(): Promise<void> {
    if (this.#closed) return
    const {metrics, pluginDir, server} = this.options
    if (!(await server.isServing())) {
      try {
        await server.serve()
      } catch (error) {
        metrics.errors.inc({class: this.name, kind: 'serve'})
        this.#failed('register failed', {err: errorMessage(error), socket: server.socketPath})
        return
      }
      this.#registeredWith = undefined
      if (this.#state === 'registered') this.#setState('serving', {socket: server.socketPath})
    }
    const kubelet = await kubeletSocketIdentity(pluginDir)
    if (kubelet !== undefined && kubelet === this.#registeredWith) return
    if (kubelet === undefined) {
      this.#failed('kubelet absent', {pluginDir})
      return
    }
    const {resourceName} = server.allocation
    try {
      await registerWithKubelet(pluginDir, `nfdctl-${this.name}.sock`, resourceName, server.options)
    } catch (error) {
      metrics.errors.inc({class: this.name, kind: 'register'})
      this.#failed('register failed', {err: errorMessage(error)})
      return
    }
    this.#registeredWith = kubelet
    this.#backoff.reset()
    metrics.registrations.inc({class: this.name})
    metrics.registered.set({class: this.name}, 1)
    this.#setState('registered', {resource: resourceName})
  }

  /** Tries again after a back-off with a cap; a new kubelet.sock (directory event) checks again sooner. */
  #failed(state: PluginState, fields: object): void {
    this.#setState(state, fields)
    this.options.metrics.registered.set({class: this.name}, 0)
    clearTimeout(this.#retry)
    this.#retry = setTimeout(() => void this.check(), this.#backoff.next()).unref()
  }

  #setState(state: PluginState, fields: object): void {
    if (this.#state === state) return
    this.#state = state
    const level = state === 'registered' || state === 'serving' ? 'info' : 'warn'
    this.options.logger[level]({class: this.name, ...fields, state}, `device plugin ${this.name}: ${state}`)
  }
}
