import {basename} from 'node:path'

import {errorMessage} from '../errors.js'
import {noopLogger, type Logger} from '../observe/logger.js'
import {NetlinkUeventSocket} from '../sys/netlink-uevents.js'
import type {AttributeReader, Device} from './types.js'
import {deviceKeyOf, parseUevent, type Uevent} from './uevent.js'

/** What the watcher needs from a scanner (SysfsScanner provides it). */
export interface DeviceSource {
  scanAll(): Promise<Device[]>
  scanOne(type: 'block' | 'char', major: number, minor: number): Promise<Device | undefined>
  readonly readAttribute: AttributeReader
}

export interface DeviceEvent {
  /** The kernel's action (add, remove, change, bind, …); `add`/`remove` also after an overflow rescan. */
  readonly action: string
  readonly device: Device
}

export interface DeviceWatcherOptions {
  readonly source: DeviceSource
  readonly onEvent: (event: DeviceEvent) => void
  readonly onError?: (error: Error) => void
  readonly logger?: Logger
  /**
   * Drop a `change` event while another for the same device still waits (agents, which need the latest
   * state, not every event); `devices list --watch` shows each one.
   */
  readonly coalesceChanges?: boolean
  /** Socket receive buffer; default 8 MiB. */
  readonly receiveBufferBytes?: number
}

/**
 * The devices of this machine, kept current from kernel uevents: a full scan at start, then every uevent
 * naming a device node updates it (re-read from sysfs, or taken from the event when the device is already
 * gone). A receive-buffer overflow (events lost) triggers a full rescan whose differences become add and
 * remove events. Events are handled one at a time, in kernel order.
 */
export class DeviceWatcher {
  readonly devices = new Map<string, Device>()
  #socket: NetlinkUeventSocket
  readonly #log: Logger
  #queue: Promise<void> = Promise.resolve()
  #rescanQueued = false
  readonly #changesQueued = new Set<string>()
  #stopped = false

  constructor(readonly options: DeviceWatcherOptions) {
    this.#log = options.logger ?? noopLogger
    this.#socket = this.#newSocket()
  }

  /**
   * Listens first, then scans, so nothing plugged in between is missed. The scan is the head of the event
   * queue: `onInitial` gets the devices before any event is delivered, so a listing printed there always
   * comes before the first event line. Resolves with the initial devices.
   */
  async start(signal: AbortSignal, onInitial?: (devices: Device[]) => void): Promise<Device[]> {
    if (signal.aborted) return []
    signal.addEventListener('abort', () => void this.stop(), {once: true})
    await this.#socket.start()
    let initial: Device[] = []
    let failure: unknown
    this.#queue = this.#queue.then(async () => {
      try {
        initial = await this.options.source.scanAll()
        for (const device of initial) this.devices.set(device.id, device)
        onInitial?.(initial)
      } catch (error) {
        failure = error
      }
    })
    await this.#queue
    if (failure) throw failure
    return initial
  }

  /**
   * After the socket failed (onError): listens on a new one, then rescans, and the differences from what
   * was known become add and remove events, as after an overflow. Rejects when the new socket cannot be opened.
   */
  async reopen(): Promise<void> {
    if (this.#stopped) return
    await this.#socket.stop()
    const socket = this.#newSocket()
    await socket.start()
    if (this.#stopped) {
      await socket.stop()
      return
    }
    this.#socket = socket
    this.#rescan('the uevent socket was opened again')
  }

  /** Closes the socket and waits for queued events. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true
    await this.#socket.stop()
    await this.#queue
  }

  #newSocket(): NetlinkUeventSocket {
    const {options} = this
    return new NetlinkUeventSocket(
      {
        onDatagram: (datagram) => {
          const event = parseUevent(datagram)
          if (!event) return
          // A storm of `change` events for one device needs one sysfs read, not one each: a change still
          // queued for the same device reads the latest state when its turn comes.
          if (event.action === 'change' && options.coalesceChanges) {
            const key = event.devPath
            if (this.#changesQueued.has(key)) return
            this.#changesQueued.add(key)
            this.#enqueue(() => {
              this.#changesQueued.delete(key)
              return this.#handle(event)
            })
            return
          }
          this.#enqueue(() => this.#handle(event))
        },
        onError: (error) => {
          // An owner that handles the failure says what it does about it.
          if (options.onError === undefined) this.#log.error({err: errorMessage(error)}, 'uevent socket failed; no more device events')
          else options.onError(error)
        },
        onOverflow: () => this.#rescan(),
      },
      options.receiveBufferBytes,
    )
  }

  #enqueue(task: () => Promise<void>): void {
    this.#queue = this.#queue.then(task).catch((error: unknown) => {
      this.#log.warn({err: errorMessage(error)}, 'could not process a uevent')
    })
  }

  async #handle(event: Uevent): Promise<void> {
    if (this.#stopped) return
    const key = deviceKeyOf(event)
    if (!key) return
    const id = `${key.type === 'block' ? 'b' : 'c'}${key.major}:${key.minor}`
    let device: Device
    if (event.action === 'remove') {
      device = this.devices.get(id) ?? deviceFromEvent(event, id, key)
      this.devices.delete(id)
    } else {
      // sysfs has the full picture (parents, udev properties); the event alone when the device went already.
      device = (await this.options.source.scanOne(key.type, key.major, key.minor)) ?? deviceFromEvent(event, id, key)
      this.devices.set(id, device)
    }
    this.options.onEvent({action: event.action, device})
  }

  #rescan(why = 'uevents were lost (receive buffer overflow)'): void {
    if (this.#rescanQueued) return
    this.#rescanQueued = true
    this.#log.warn({}, `${why}; rescanning all devices`)
    this.#enqueue(async () => {
      this.#rescanQueued = false
      const now = await this.options.source.scanAll()
      const seen = new Set(now.map((d) => d.id))
      for (const [id, device] of this.devices) {
        if (!seen.has(id)) {
          this.devices.delete(id)
          this.options.onEvent({action: 'remove', device})
        }
      }
      for (const device of now) {
        if (!this.devices.has(device.id)) this.options.onEvent({action: 'add', device})
        this.devices.set(device.id, device)
      }
    })
  }
}

function deviceFromEvent(event: Uevent, id: string, key: NonNullable<ReturnType<typeof deviceKeyOf>>): Device {
  return {
    devName: key.devName,
    devNode: `/dev/${key.devName}`,
    devPath: event.devPath,
    devType: event.env.DEVTYPE,
    id,
    kernelName: basename(event.devPath),
    major: key.major,
    minor: key.minor,
    properties: event.env,
    subsystem: event.subsystem ?? '',
    type: key.type,
  }
}
