import {mkdir} from 'node:fs/promises'

import type {ClassMembers} from '../devices/class-members.js'
import type {DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {healthy, unhealthy} from '../kubelet/device-plugin-api.js'
import type {Logger} from '../observe/logger.js'
import type {SourceSupervisor} from '../source-supervisor.js'
import {CdiSpecWriter} from '../runtime/cdi-spec.js'
import type {ClassAllocation} from './class-allocation.js'
import {cdiFileOf, cdiSpecOf} from './class-cdi.js'
import type {PluginMetrics} from './plugin-metrics.js'
import {PluginRegistration} from './plugin-registration.js'

export interface PluginSetOptions {
  /** The node's classes and their devices; the caller keeps them in step and tells the set (classesChanged, publish). */
  readonly members: ClassMembers
  /** kubelet's device-plugin directory: kubelet.sock and the plugins' sockets. */
  readonly pluginDir: string
  /** Write a CDI spec per class here and name CDI devices in Allocate answers; undefined: no CDI. */
  readonly cdiDir?: string
  readonly metrics: PluginMetrics
  readonly logger: Logger
  /** Longest wait between registration attempts while kubelet does not answer; default 5 s. */
  readonly maxRetryMs?: number
  /** Serves and registers a plugin again after a failure, never giving up (each plugin is a source of its own). */
  readonly supervisor: SourceSupervisor
  /** Awaited before an Allocate answer: the device numbers are recorded as the agent's (the agent's OwnedDevices.saved). */
  readonly beforeAllocate?: () => Promise<void>
}

/**
 * One kubelet device plugin per DeviceClass: `devices.nfdctl.io/<class>` on `<plugin-dir>/nfdctl-<class>.sock`.
 * Changed device lists go out on ListAndWatch at once. Each plugin's socket is kept (PluginRegistration's
 * SocketKeeper): when kubelet restarts it deletes our sockets and makes a new kubelet.sock, and each plugin
 * serves again and re-registers.
 */
export class PluginSet {
  readonly #plugins = new Map<string, PluginRegistration>()
  /** Plugins of classes that went away, being shut down. */
  readonly #retiring = new Set<Promise<void>>()
  readonly #log: Logger
  readonly #cdi: CdiSpecWriter | undefined
  #started = false
  #stopped = false

  constructor(readonly options: PluginSetOptions) {
    this.#log = options.logger
    this.#cdi =
      options.cdiDir === undefined
        ? undefined
        : new CdiSpecWriter((name, error) => {
            options.metrics.errors.inc({class: name, kind: 'cdi'})
            this.#log.error({class: name, cdiDir: options.cdiDir, err: errorMessage(error)}, 'cannot write the CDI spec')
          })
    for (const deviceClass of pluginClasses(options.members.classes))
      this.#plugins.set(deviceClass.metadata.name, PluginRegistration.ofClass(deviceClass, {...this.options, cdi: this.options.cdiDir !== undefined}))
  }

  get classNames(): string[] {
    return [...this.#plugins.keys()]
  }

  /** Serves every class and registers it (retried in the background while kubelet is absent). */
  async start(): Promise<void> {
    await mkdir(this.options.pluginDir, {recursive: true})
    this.publish(new Set(this.classNames), true)
    this.#started = true
    for (const plugin of this.#plugins.values()) await plugin.start()
  }

  /**
   * The members' classes changed: a class that is new gets a plugin that serves and registers; one that is
   * gone, or whose spec changed, has its plugin shut down (its socket removed, which kubelet notices) and,
   * when changed, a new one. Every list goes to kubelet again.
   */
  classesChanged(): void {
    const next = new Map(pluginClasses(this.options.members.classes).map((c) => [c.metadata.name, c]))
    for (const [name, plugin] of this.#plugins) {
      const wanted = next.get(name)
      if (wanted !== undefined && JSON.stringify(wanted.spec) === JSON.stringify(plugin.allocation.deviceClass.spec)) continue
      this.#plugins.delete(name)
      this.#retire(plugin)
    }
    const added: PluginRegistration[] = []
    for (const deviceClass of next.values()) {
      if (this.#plugins.has(deviceClass.metadata.name)) continue
      const plugin = PluginRegistration.ofClass(deviceClass, {...this.options, cdi: this.options.cdiDir !== undefined})
      this.#plugins.set(deviceClass.metadata.name, plugin)
      added.push(plugin)
    }
    this.publish(new Set(this.classNames), true)
    if (this.#started && !this.#stopped) for (const plugin of added) void plugin.start()
  }

  /** Sends the lists of these classes that changed to kubelet, and rewrites their CDI specs (every list when told). */
  publish(classes: ReadonlySet<string>, everything = false): void {
    for (const [name, plugin] of this.#plugins) {
      if (!classes.has(name)) continue
      const changed = plugin.allocation.setDevices(this.options.members.of(name))
      if (!changed && !everything) continue
      plugin.push()
      this.#writeCdi(plugin.allocation)
    }
  }

  /** Ready when every class is registered with the running kubelet. */
  status(): {ready: boolean; reason: string} {
    const waiting = [...this.#plugins.values()].filter((p) => p.state !== 'registered')
    if (waiting.length === 0) return {ready: true, reason: `registered: ${this.classNames.join(', ')}`}
    return {ready: false, reason: waiting.map((p) => `${p.name}: ${p.state}`).join('; ')}
  }

  /** Stops the servers and removes their sockets; CDI specs stay for the containers that use them. */
  async stop(): Promise<void> {
    this.#stopped = true
    for (const plugin of this.#plugins.values()) await this.#shutDown(plugin)
    await Promise.all(this.#retiring)
  }

  async #shutDown(plugin: PluginRegistration): Promise<void> {
    await plugin.shutDown()
    await this.#cdi?.written(plugin.name)
    // A class changed has a new plugin under the same name, with its own figures.
    if (this.#plugins.get(plugin.name) === plugin) this.options.metrics.registered.set({class: plugin.name}, 0)
  }

  /** A class that went away: its plugin stops serving, and its CDI spec goes (no devices left in it). */
  #retire(plugin: PluginRegistration): void {
    const {name} = plugin
    this.#log.info({class: name}, `device plugin ${name}: class changed or gone; shutting its plugin down`)
    const done = this.#shutDown(plugin)
      .then(() => {
        if (this.#plugins.has(name)) return
        const {metrics} = this.options
        metrics.registered.remove({class: name})
        for (const health of [healthy, unhealthy]) metrics.devices.remove({class: name, health})
        plugin.allocation.setDevices([])
        this.#writeCdi(plugin.allocation)
        return this.#cdi?.written(name)
      })
      .finally(() => this.#retiring.delete(done))
    this.#retiring.add(done)
  }

  #writeCdi(allocation: ClassAllocation): void {
    const {cdiDir} = this.options
    if (this.#cdi === undefined || cdiDir === undefined) return
    const spec = cdiSpecOf(allocation.name, allocation.presentDevices(), allocation.deviceClass.spec.permissions)
    this.#cdi.write(allocation.name, cdiFileOf(cdiDir, allocation.name), spec)
  }
}

/** The classes served by a device plugin: all but those allocated through DRA (the DRA driver's). */
const pluginClasses = (classes: readonly DeviceClass[]): DeviceClass[] => classes.filter((c) => c.spec.allocation !== 'DRA')
