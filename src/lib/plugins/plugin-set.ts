import {watch, type FSWatcher} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import {ClassMemory, DeviceMatcher} from '../devices/device-matcher.js'
import type {AttributeReader, Device, DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {ClassAllocation} from './class-allocation.js'
import {ClassPluginServer} from './class-plugin-server.js'
import {cdiSpecOf, writeCdiSpec} from './cdi-spec.js'
import {healthy, unhealthy} from './kubelet-api.js'
import {kubeletSocketIdentity, registerWithKubelet} from './kubelet-registration.js'
import type {PluginMetrics} from './plugin-metrics.js'

export interface PluginSetOptions {
  readonly classes: readonly DeviceClass[]
  /** kubelet's device-plugin directory: kubelet.sock and the plugins' sockets. */
  readonly pluginDir: string
  /** Write a CDI spec per class here and name CDI devices in Allocate answers; undefined: no CDI. */
  readonly cdiDir?: string
  readonly readAttribute: AttributeReader
  readonly metrics: PluginMetrics
  readonly logger: Logger
  /** Longest wait between registration attempts while kubelet does not answer; default 5 s. */
  readonly maxRetryMs?: number
}

type PluginState = 'serving' | 'registered' | 'kubelet absent' | 'register failed'

interface ClassPlugin {
  readonly allocation: ClassAllocation
  readonly server: ClassPluginServer
  /** The kubelet.sock identity this plugin registered with; a kubelet restart makes a new one. */
  registeredWith?: number
  state: PluginState
  queue: Promise<void>
  retry?: NodeJS.Timeout
  retryMs: number
  cdi: Promise<void>
  /** Its class went away or changed: it never serves or registers again. */
  retired?: boolean
}

/**
 * One kubelet device plugin per DeviceClass: `devices.nfdctl.io/<class>` on `<plugin-dir>/nfdctl-<class>.sock`.
 * Serve first, then register. Device events change the classes' lists, which go out on ListAndWatch at
 * once. The plugin directory is watched (inotify): when kubelet restarts it deletes our sockets and makes a
 * new kubelet.sock, and each plugin serves again and re-registers. Without kubelet, registration is retried
 * with back-off, and logged once per change of state.
 */
export class PluginSet {
  readonly #plugins = new Map<string, ClassPlugin>()
  #memory: ClassMemory
  /** The devices of each class now, by device id (major:minor). */
  readonly #members = new Map<string, Map<string, Device>>()
  /** Plugins of classes that went away, being shut down. */
  readonly #retiring = new Set<Promise<void>>()
  readonly #log: Logger
  #watcher: FSWatcher | undefined
  #started = false
  #stopped = false

  constructor(readonly options: PluginSetOptions) {
    this.#log = options.logger
    this.#memory = new ClassMemory(new DeviceMatcher(options.classes), options.readAttribute)
    for (const deviceClass of options.classes) this.#plugins.set(deviceClass.metadata.name, this.#pluginOf(deviceClass))
  }

  get classNames(): string[] {
    return [...this.#plugins.keys()]
  }

  /**
   * Serves every class and registers it (retried in the background while kubelet is absent). Devices come
   * from deviceEvent(), the initial scan as `add` events first.
   */
  async start(): Promise<void> {
    await mkdir(this.options.pluginDir, {recursive: true})
    this.#publish(new Set(this.classNames), true)
    this.#watcher = watch(this.options.pluginDir, () => this.#checkAll())
    this.#watcher.on('error', (error) => {
      this.#log.error({err: errorMessage(error), pluginDir: this.options.pluginDir}, 'cannot watch the plugin directory; kubelet restarts are noticed on the retry timer only')
    })
    this.#started = true
    for (const plugin of this.#plugins.values()) await this.#check(plugin)
  }

  /**
   * The node's classes changed (the agent follows the cluster's): a class that is new gets a plugin that
   * serves and registers; one that is gone, or whose spec changed, has its plugin shut down (its socket
   * removed, which kubelet notices) and, when changed, a new one. Every present device is placed again, and
   * the lists that changed go to kubelet.
   */
  setClasses(classes: readonly DeviceClass[], present: Iterable<Device>): void {
    const next = new Map(classes.map((c) => [c.metadata.name, c]))
    for (const [name, plugin] of this.#plugins) {
      const wanted = next.get(name)
      if (wanted !== undefined && JSON.stringify(wanted.spec) === JSON.stringify(plugin.allocation.deviceClass.spec)) continue
      this.#plugins.delete(name)
      this.#members.delete(name)
      this.#retire(plugin)
    }
    const added: ClassPlugin[] = []
    for (const deviceClass of classes) {
      if (this.#plugins.has(deviceClass.metadata.name)) continue
      const plugin = this.#pluginOf(deviceClass)
      this.#plugins.set(deviceClass.metadata.name, plugin)
      added.push(plugin)
    }
    this.#memory = new ClassMemory(new DeviceMatcher(classes), this.options.readAttribute)
    this.#members.clear()
    for (const device of present) this.#place('add', device)
    this.#publish(new Set(this.classNames), true)
    if (this.#started && !this.#stopped) for (const plugin of added) void this.#check(plugin)
  }

  /**
   * A device event from the uevent watcher (or the initial scan): lists that changed go to kubelet now.
   * Returns the classes the event touched (the device is in them now, or left them).
   */
  deviceEvent(action: string, device: Device): ReadonlySet<string> {
    const touched = this.#place(action, device)
    this.#publish(touched)
    return touched
  }

  /** The devices of each class present now. */
  members(): Map<string, Device[]> {
    return new Map(this.classNames.map((name) => [name, [...(this.#members.get(name)?.values() ?? [])]]))
  }

  /** Ready when every class is registered with the running kubelet. */
  status(): {ready: boolean; reason: string} {
    const waiting = [...this.#plugins.values()].filter((p) => p.state !== 'registered')
    if (waiting.length === 0) return {ready: true, reason: `registered: ${this.classNames.join(', ')}`}
    return {ready: false, reason: waiting.map((p) => `${p.allocation.name}: ${p.state}`).join('; ')}
  }

  /** Stops the servers and removes their sockets; CDI specs stay for the containers that use them. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#watcher?.close()
    for (const plugin of this.#plugins.values()) await this.#shutDown(plugin)
    await Promise.all(this.#retiring)
  }

  #pluginOf(deviceClass: DeviceClass): ClassPlugin {
    const allocation = new ClassAllocation(deviceClass, this.options.cdiDir !== undefined)
    const socket = join(this.options.pluginDir, `nfdctl-${deviceClass.metadata.name}.sock`)
    const server = new ClassPluginServer(allocation, socket, this.options.metrics, this.#log.child({class: deviceClass.metadata.name}))
    return {allocation, cdi: Promise.resolve(), queue: Promise.resolve(), retryMs: 0, server, state: 'serving'}
  }

  async #shutDown(plugin: ClassPlugin): Promise<void> {
    clearTimeout(plugin.retry)
    await plugin.queue
    await plugin.cdi
    await plugin.server.close()
    // A class changed has a new plugin under the same name, with its own figures.
    if (this.#plugins.get(plugin.allocation.name) === plugin) this.options.metrics.registered.set({class: plugin.allocation.name}, 0)
  }

  /** A class that went away: its plugin stops serving, and its CDI spec goes (no devices left in it). */
  #retire(plugin: ClassPlugin): void {
    plugin.retired = true
    this.#log.info({class: plugin.allocation.name}, `device plugin ${plugin.allocation.name}: class changed or gone; shutting its plugin down`)
    const name = plugin.allocation.name
    const done = this.#shutDown(plugin).then(() => {
      if (this.#plugins.has(name)) return
      const {metrics} = this.options
      metrics.registered.remove({class: name})
      for (const health of [healthy, unhealthy]) metrics.devices.remove({class: name, health})
      plugin.allocation.setDevices([])
      this.#writeCdi(plugin)
      return plugin.cdi
    }).finally(() => this.#retiring.delete(done))
    this.#retiring.add(done)
  }

  /** Puts the device in the classes it matches now (out of all of them when removed); returns the classes touched. */
  #place(action: string, device: Device): Set<string> {
    const inClasses = new Set(this.#memory.classesAfter(action, device))
    const touched = new Set<string>()
    for (const name of this.classNames) {
      let members = this.#members.get(name)
      if (members === undefined) this.#members.set(name, (members = new Map()))
      const belongs = action !== 'remove' && inClasses.has(name)
      if (belongs) members.set(device.id, device)
      if (belongs || members.delete(device.id)) touched.add(name)
    }
    return touched
  }

  /** Sends the lists that changed to kubelet, and rewrites those classes' CDI specs (all of them at start). */
  #publish(classes: ReadonlySet<string>, everything = false): void {
    for (const plugin of this.#plugins.values()) {
      const name = plugin.allocation.name
      if (!classes.has(name)) continue
      const changed = plugin.allocation.setDevices([...(this.#members.get(name)?.values() ?? [])])
      if (!changed && !everything) continue
      const listed = plugin.allocation.listAndWatch()
      this.options.metrics.devices.set({class: name, health: healthy}, listed.filter((d) => d.health === healthy).length)
      this.options.metrics.devices.set({class: name, health: unhealthy}, listed.filter((d) => d.health === unhealthy).length)
      plugin.server.push()
      this.#writeCdi(plugin)
    }
  }

  #writeCdi(plugin: ClassPlugin): void {
    const cdiDir = this.options.cdiDir
    if (cdiDir === undefined) return
    const {deviceClass} = plugin.allocation
    const spec = cdiSpecOf(deviceClass.metadata.name, plugin.allocation.presentDevices(), deviceClass.spec.permissions)
    plugin.cdi = plugin.cdi.then(() => writeCdiSpec(cdiDir, spec)).catch((error: unknown) => {
      this.options.metrics.errors.inc({class: deviceClass.metadata.name, kind: 'cdi'})
      this.#log.error({class: deviceClass.metadata.name, cdiDir, err: errorMessage(error)}, 'cannot write the CDI spec')
    })
  }

  #checkAll(): void {
    for (const plugin of this.#plugins.values()) void this.#check(plugin)
  }

  /** Serialised per class: serve again when our socket is gone, register when the running kubelet does not know us. */
  #check(plugin: ClassPlugin): Promise<void> {
    plugin.queue = plugin.queue.then(async () => {
      if (this.#stopped || plugin.retired === true) return
      const name = plugin.allocation.name
      if (!(await plugin.server.isServing())) {
        try {
          await plugin.server.serve()
        } catch (error) {
          this.options.metrics.errors.inc({class: name, kind: 'serve'})
          this.#setState(plugin, 'register failed', {err: errorMessage(error), socket: plugin.server.socketPath})
          this.#retryLater(plugin)
          return
        }
        plugin.registeredWith = undefined
        if (plugin.state === 'registered') this.#setState(plugin, 'serving', {socket: plugin.server.socketPath})
      }
      const kubelet = await kubeletSocketIdentity(this.options.pluginDir)
      if (kubelet !== undefined && kubelet === plugin.registeredWith) return
      if (kubelet === undefined) {
        this.#setState(plugin, 'kubelet absent', {pluginDir: this.options.pluginDir})
        this.#retryLater(plugin)
        return
      }
      try {
        await registerWithKubelet(this.options.pluginDir, `nfdctl-${name}.sock`, plugin.allocation.resourceName, plugin.server.options)
      } catch (error) {
        this.options.metrics.errors.inc({class: name, kind: 'register'})
        this.#setState(plugin, 'register failed', {err: errorMessage(error)})
        this.#retryLater(plugin)
        return
      }
      plugin.registeredWith = kubelet
      plugin.retryMs = 0
      this.options.metrics.registrations.inc({class: name})
      this.options.metrics.registered.set({class: name}, 1)
      this.#setState(plugin, 'registered', {resource: plugin.allocation.resourceName})
    })
    return plugin.queue
  }

  /** Back-off with a cap; a new kubelet.sock (directory event) checks again sooner. */
  #retryLater(plugin: ClassPlugin): void {
    this.options.metrics.registered.set({class: plugin.allocation.name}, 0)
    clearTimeout(plugin.retry)
    plugin.retryMs = Math.min(Math.max(plugin.retryMs * 2, 100), this.options.maxRetryMs ?? 5000)
    plugin.retry = setTimeout(() => void this.#check(plugin), plugin.retryMs)
    plugin.retry.unref()
  }

  /** Logs a plugin's state only when it changes, not once per attempt. */
  #setState(plugin: ClassPlugin, state: PluginState, fields: object): void {
    if (plugin.state === state) return
    plugin.state = state
    const level = state === 'registered' || state === 'serving' ? 'info' : 'warn'
    this.#log[level]({class: plugin.allocation.name, ...fields, state}, `device plugin ${plugin.allocation.name}: ${state}`)
  }
}
