import {join} from 'node:path'

import type {DeviceClass} from '../devices/types.js'
import {healthy, unhealthy} from '../kubelet/device-plugin-api.js'
import {kubeletSocketIdentity, registerWithKubelet} from '../kubelet/registration.js'
import {SocketKeeper, type KeeperState} from '../kubelet/socket-keeper.js'
import type {Logger} from '../observe/logger.js'
import type {SourceSupervisor} from '../source-supervisor.js'
import {ClassAllocation} from './class-allocation.js'
import {ClassPluginServer} from './class-plugin-server.js'
import type {PluginMetrics} from './plugin-metrics.js'

export type PluginState = KeeperState

export interface PluginRegistrationOptions {
  readonly server: ClassPluginServer
  /** kubelet's device-plugin directory: kubelet.sock and the plugins' sockets. */
  readonly pluginDir: string
  readonly metrics: PluginMetrics
  readonly logger: Logger
  /** Longest wait between attempts while kubelet does not answer; default 5 s. */
  readonly maxRetryMs?: number
  /** Restarts the plugin after a failure: 100 ms doubling to maxRetryMs, never given up on (kubelet may come at any time). */
  readonly supervisor: SourceSupervisor
}

/**
 * One class's plugin with kubelet, kept by a SocketKeeper: serve first, then register; serve again when
 * kubelet deleted the socket (it does when it starts), register again when kubelet.sock is a new one. The
 * plugin directory is watched (inotify); without kubelet, attempts are retried with back-off that never
 * gives up. The state is logged only when it changes.
 */
export class PluginRegistration {
  readonly #keeper: SocketKeeper

  /** The plugin of a class: `devices.nfdctl.io/<class>` on `<plugin-dir>/nfdctl-<class>.sock`, naming CDI devices with `cdi`. */
  static ofClass(deviceClass: DeviceClass, options: Omit<PluginRegistrationOptions, 'server'> & {readonly cdi: boolean; readonly beforeAllocate?: () => Promise<void>}): PluginRegistration {
    const allocation = new ClassAllocation(deviceClass, options.cdi)
    const socket = join(options.pluginDir, `nfdctl-${deviceClass.metadata.name}.sock`)
    const server = new ClassPluginServer(allocation, socket, options.metrics, options.logger.child({class: deviceClass.metadata.name}), options.beforeAllocate)
    return new PluginRegistration({...options, server})
  }

  constructor(readonly options: PluginRegistrationOptions) {
    const {logger, metrics, pluginDir, server} = options
    const name = server.allocation.name
    this.#keeper = new SocketKeeper({
      logger,
      onState: (state, detail) => this.#stateChanged(state, detail),
      registrar: {
        kubelet: () => kubeletSocketIdentity(pluginDir),
        register: async () => {
          try {
            await registerWithKubelet(pluginDir, `nfdctl-${name}.sock`, server.allocation.resourceName, server.options)
          } catch (error) {
            metrics.errors.inc({class: name, kind: 'register'})
            throw error
          }
          metrics.registrations.inc({class: name})
          metrics.registered.set({class: name}, 1)
        },
      },
      restarts: {
        name: `device plugin ${name}`,
        // stableMs 0: a plugin that worked starts its next run of failures at the shortest wait, as a kubelet restart needs.
        policy: {backoff: {baseMs: 100, maxMs: options.maxRetryMs ?? 5000}, stableMs: 0},
        supervisor: options.supervisor,
      },
      socket: {
        close: () => server.close(),
        isServing: () => server.isServing(),
        serve: () =>
          server.serve().catch((error: unknown) => {
            metrics.errors.inc({class: name, kind: 'serve'})
            throw error
          }),
      },
      watch: [pluginDir],
    })
  }

  get allocation(): ClassAllocation {
    return this.options.server.allocation
  }

  get name(): string {
    return this.allocation.name
  }

  get state(): PluginState {
    return this.#keeper.state
  }

  /** Sends the class's list to kubelet (ListAndWatch), and counts it. */
  push(): void {
    const {metrics, server} = this.options
    const listed = this.allocation.listAndWatch()
    metrics.devices.set({class: this.name, health: healthy}, listed.filter((d) => d.health === healthy).length)
    metrics.devices.set({class: this.name, health: unhealthy}, listed.filter((d) => d.health === unhealthy).length)
    server.push()
  }

  /** Watches the plugin directory, serves and registers (retried in the background while kubelet is absent). */
  start(): Promise<void> {
    return this.#keeper.start()
  }

  /** Stops serving and retrying; its socket is removed, which kubelet notices. */
  shutDown(): Promise<void> {
    return this.#keeper.close()
  }

  #stateChanged(state: PluginState, detail: {readonly err?: string; readonly step?: 'serve' | 'register'}): void {
    const {metrics} = this.options
    if (state === 'kubelet absent' || state === 'register failed') metrics.registered.set({class: this.name}, 0)
    const fields = this.#logFields(state, detail)
    const level = state === 'registered' || state === 'serving' ? 'info' : 'warn'
    this.options.logger[level]({class: this.name, ...fields, state}, `device plugin ${this.name}: ${state}`)
  }

  /** What a state's line says beside the state: the socket served, the directory without kubelet, the resource, the error. */
  #logFields(state: PluginState, detail: {readonly err?: string; readonly step?: 'serve' | 'register'}): Record<string, unknown> {
    const {pluginDir, server} = this.options
    if (state === 'serving') return {socket: server.socketPath}
    if (state === 'kubelet absent') return {pluginDir}
    if (state === 'registered') return {resource: server.allocation.resourceName}
    return detail.step === 'serve' ? {err: detail.err, socket: server.socketPath} : {err: detail.err}
  }
}
