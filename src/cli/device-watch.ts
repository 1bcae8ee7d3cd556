import {DeviceWatcher, type DeviceWatcherOptions} from '../lib/devices/device-watcher.js'
import type {Device} from '../lib/devices/types.js'

/**
 * A command's DeviceWatcher whose failure ends the command: a dead uevent socket aborts `signal` and the
 * command exits 1, rather than carrying on deaf (a --watch that never prints again, kubelet holding device
 * lists that never change).
 */
export class DeviceWatch {
  /** Aborted by the command's signal (SIGINT, SIGTERM) or when the uevent socket fails. */
  readonly signal: AbortSignal
  readonly #failed = new AbortController()
  readonly #watcher: DeviceWatcher

  constructor(commandSignal: AbortSignal, options: Omit<DeviceWatcherOptions, 'onError'>) {
    this.signal = AbortSignal.any([commandSignal, this.#failed.signal])
    this.#watcher = new DeviceWatcher({...options, onError: (error) => this.#failed.abort(error)})
  }

  /** Listens, then scans: `onInitial` gets the devices present before any event is delivered. */
  start(onInitial: (devices: Device[]) => void): Promise<Device[]> {
    return this.#watcher.start(this.signal, onInitial)
  }

  /** Closes the socket and waits for queued events. */
  stop(): Promise<void> {
    return this.#watcher.stop()
  }

  /** The uevent socket's failure, if it failed: thrown, the command exits 1. */
  throwIfFailed(): void {
    if (this.#failed.signal.aborted) throw this.#failed.signal.reason
  }
}
