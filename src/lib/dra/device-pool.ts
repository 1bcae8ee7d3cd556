import type {ClassMembers} from '../devices/class-members.js'
import type {DeviceClass} from '../devices/types.js'
import type {Timers} from '../event-batcher.js'
import type {Logger} from '../observe/logger.js'
import {nodeDevicesOf, type NodeDevices, type SliceDevice} from './resource-slices.js'
import {goneDevicesOf, poolDevicesOf, unpluggedPolicyOf, type GoneDevice} from './unplugged-devices.js'

/** Wall-clock time (a taint's timeAdded) and the timer that turns an unplugged device's taint NoExecute. */
export type PoolClock = Timers

const wallClock: PoolClock = {
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => Date.now(),
  set: (fn, ms) => setTimeout(fn, ms).unref(),
}

// setTimeout's longest delay; a later change is waited for in steps.
const longestTimerMs = 2_147_483_647

export interface DevicePoolOptions {
  /** The node's classes and the devices of each present now, kept in step by the agent. */
  readonly members: Pick<ClassMembers, 'classes' | 'classNames' | 'of' | 'present'>
  /** The cluster's valid classes, every node's: their resource.k8s.io DeviceClasses are kept from here. */
  readonly clusterClasses: () => readonly DeviceClass[]
  /** Where the pool's devices are published (SlicePublisher). */
  readonly slices: {setDevices(devices: readonly SliceDevice[]): void}
  /** The resource.k8s.io DeviceClasses (DraDeviceClasses). */
  readonly deviceClasses: {sync(classes: readonly DeviceClass[]): Promise<void>}
  readonly logger: Logger
  /** The pool was computed again and published: the claims' health and specs follow. */
  readonly onPublished: () => void
  readonly clock?: PoolClock
}

/**
 * The node's pool: the devices of its DRA classes, one per stable ID, published as ResourceSlices whenever a
 * DRA class's devices change, and a resource.k8s.io DeviceClass per DRA class of the cluster. A device
 * unplugged stays listed, tainted, until it is back (unplugged-devices.ts); the gone devices live in this
 * process only. A device whose classes do not all fit in its slice entry is said once.
 */
export class DevicePool {
  #devices: NodeDevices = {byName: new Map(), devices: [], dropped: new Map(), members: new Map()}
  #gone = new Map<string, GoneDevice>()
  /** Set while an unplugged device's taint is to turn NoExecute. */
  #timer: unknown
  readonly #clock: PoolClock
  /** Classes whose devices changed since the last flush. */
  readonly #changed = new Set<string>()
  /** Devices whose classes did not all fit in the slice, said once. */
  readonly #toldDropped = new Set<string>()

  constructor(readonly options: DevicePoolOptions) {
    this.#clock = options.clock ?? wallClock
  }

  /** The pool's present devices as last computed (the gone ones are only in the slices). */
  get devices(): NodeDevices {
    return this.#devices
  }

  /** The unplugged devices the slices list, tainted, by DRA device name. */
  get unplugged(): ReadonlyMap<string, GoneDevice> {
    return this.#gone
  }

  /** Computes the pool from the members and hands it to the slices (written once they are started). */
  compute(): void {
    const {logger, members, slices} = this.options
    const before = this.#devices
    this.#devices = nodeDevicesOf(members.classes, (name) => members.of(name))
    const draClasses = members.classes.filter((c) => c.spec.allocation === 'DRA')
    const onNode = new Set(members.present().map((d) => d.id))
    const now = this.#clock.now()
    this.#gone = goneDevicesOf({
      after: this.#devices,
      before,
      draClasses: new Set(draClasses.map((c) => c.metadata.name)),
      now,
      onNode: (device) => onNode.has(device.id),
      previous: this.#gone,
    })
    const policies = new Map(draClasses.map((c) => [c.metadata.name, unpluggedPolicyOf(c)]))
    const pool = poolDevicesOf(this.#devices, this.#gone, (name) => policies.get(name) ?? {}, now)
    this.#schedule(pool.changesAt === undefined ? undefined : pool.changesAt - now)
    for (const [device, classes] of this.#devices.dropped) {
      if (this.#toldDropped.has(device)) continue
      this.#toldDropped.add(device)
      logger.warn({classes, device}, 'device is in more classes than a ResourceSlice device can name; claims of these classes cannot get it')
    }
    slices.setDevices(pool.devices)
  }

  stop(): void {
    this.#schedule(undefined)
  }

  /** Publishes again in `ms`, when a gone device's taint turns NoExecute (undefined: never). */
  #schedule(ms: number | undefined): void {
    if (this.#timer !== undefined) this.#clock.clear(this.#timer)
    this.#timer = undefined
    if (ms === undefined) return
    this.#timer = this.#clock.set(
      () => {
        this.#timer = undefined
        this.publish(new Set(), true)
      },
      Math.min(Math.max(ms, 0), longestTimerMs),
    )
  }

  /** Classes changed: the pool, the resource.k8s.io DeviceClasses and the health follow. */
  classesChanged(): void {
    void this.options.deviceClasses.sync(this.options.clusterClasses())
    this.publish(new Set(this.options.members.classNames), true)
  }

  /** Devices of these classes came or went: published by the next flush(). */
  devicesChanged(classes: ReadonlySet<string>): void {
    for (const name of classes) this.#changed.add(name)
  }

  /** Publishes what devicesChanged() collected. */
  flush(): void {
    if (this.#changed.size === 0) return
    const changed = new Set(this.#changed)
    this.#changed.clear()
    this.publish(changed)
  }

  /** Devices of these classes came or went: the pool is published again when a DRA class is among them (or `everything`). */
  publish(classes: ReadonlySet<string>, everything = false): void {
    if (!everything && !this.options.members.classes.some((c) => c.spec.allocation === 'DRA' && classes.has(c.metadata.name))) return
    this.compute()
    this.options.onPublished()
  }
}
