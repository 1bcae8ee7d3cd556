import {stableDeviceId} from '../devices/device-identity.js'
import {annotationOf, envNameOf, resourceNameOf} from '../devices/resource-names.js'
import type {Device, DeviceClass} from '../devices/types.js'
import {healthy, unhealthy, type ContainerAllocateResponse, type PluginDevice, type PreferredAllocationRequest} from '../kubelet/device-plugin-api.js'

/** Slot IDs of Class allocation: slot-0 … slot-<capacity-1>. */
const slotId = (index: number): string => `slot-${index}`

/**
 * What one class's device plugin advertises and hands out, from the devices in the class now. Pure: the
 * plugin server feeds it device lists and asks it for ListAndWatch lists and Allocate answers.
 *
 * - Class allocation: `capacity` slots, always Healthy whether or not a device is present, because a
 *   container holding the class gets the devices plugged in later too (the agent adds them).
 * - Device allocation: one ID per device; a device that went away stays listed as Unhealthy, so that
 *   kubelet stops offering it but keeps the pods that hold it.
 */
export class ClassAllocation {
  readonly #present = new Map<string, Device>()
  /**
   * Devices that went away, most recent last: listed Unhealthy so that kubelet keeps the pods holding them.
   * Bounded: a node that sees a stream of serials must not list every one it ever saw.
   */
  readonly #gone = new Set<string>()

  constructor(
    readonly deviceClass: DeviceClass,
    readonly cdi: boolean,
  ) {}

  get name(): string {
    return this.deviceClass.metadata.name
  }

  get resourceName(): string {
    return resourceNameOf(this.name)
  }

  /** Replaces the class's devices; true when the advertised list changed. */
  setDevices(devices: readonly Device[]): boolean {
    const before = JSON.stringify(this.listAndWatch())
    const next = new Map(devices.map((d) => [stableDeviceId(d, this.deviceClass.spec.identity), d]))
    for (const id of this.#present.keys()) {
      if (next.has(id)) continue
      this.#gone.delete(id)
      this.#gone.add(id)
    }
    for (const id of this.#gone) if (this.#gone.size > maxGoneDevices) this.#gone.delete(id)
    this.#present.clear()
    for (const [id, device] of next) {
      this.#present.set(id, device)
      this.#gone.delete(id)
    }
    return JSON.stringify(this.listAndWatch()) !== before
  }

  /** The devices of the class present now, by stable ID, in ID order. */
  presentDevices(): Array<[string, Device]> {
    return [...this.#present].sort(([a], [b]) => compareIds(a, b))
  }

  listAndWatch(): PluginDevice[] {
    if (this.deviceClass.spec.allocation === 'Class') {
      return Array.from({length: this.deviceClass.spec.capacity}, (_, i) => ({health: healthy, ID: slotId(i)}))
    }
    const listed: PluginDevice[] = this.presentDevices().map(([id]) => ({health: healthy, ID: id}))
    for (const id of [...this.#gone].sort()) listed.push({health: unhealthy, ID: id})
    return listed
  }

  /**
   * Device allocation: the devices kubelet must include, then the others in ID order (kubelet's own choice
   * is arbitrary; ours keeps the same devices together run after run). Class allocation: slots in order.
   */
  preferredAllocation(request: PreferredAllocationRequest): string[][] {
    return request.container_requests.map((r) => {
      const chosen = [...new Set(r.must_include_deviceIDs)]
      for (const id of [...r.available_deviceIDs].sort(compareIds)) {
        if (chosen.length >= r.allocation_size) break
        if (!chosen.includes(id)) chosen.push(id)
      }
      return chosen.slice(0, Math.max(r.allocation_size, r.must_include_deviceIDs.length))
    })
  }

  /**
   * One container's answer. Class allocation: every device of the class present now (later ones come from
   * the agent). Device allocation: the devices of the IDs; an ID whose device is gone is an error, since
   * kubelet must not start a container without the device it was promised.
   */
  allocate(ids: readonly string[]): ContainerAllocateResponse {
    const devices: Array<[string, Device]> = []
    if (this.deviceClass.spec.allocation === 'Class') {
      devices.push(...this.presentDevices())
    } else {
      for (const id of ids) {
        const device = this.#present.get(id)
        if (device === undefined) throw new Error(`device ${id} of class ${this.name} is not present on this node any more`)
        devices.push([id, device])
      }
    }
    const permissions = this.deviceClass.spec.permissions
    return {
      annotations: {[annotationOf(this.name)]: ids.join(',')},
      cdi_devices: this.cdi ? devices.map(([id]) => ({name: `${this.resourceName}=${id}`})) : [],
      devices: devices.map(([, d]) => ({container_path: d.devNode, host_path: d.devNode, permissions})),
      envs: {[envNameOf(this.name)]: devices.map(([, d]) => d.devNode).join(',')},
      mounts: [],
    }
  }
}

/** Gone devices listed at most: more than a node holds at once, far fewer than a stream of serials brings. */
export const maxGoneDevices = 64

// slot-2 before slot-10.
const compareIds = (a: string, b: string): number => a.localeCompare(b, 'en', {numeric: true})
