import type {Device} from '../devices/types.js'
import type {PreparedClaim} from './prepared-claims.js'
import {draDriver} from './resource-slices.js'

/** A device's health as kubelet's DRAResourceHealth stream and the claim's status tell it. */
export interface DeviceHealth {
  readonly device: string
  readonly healthy: boolean
  /** One line for the pod's status: where the device is, or that it is gone. */
  readonly message: string
}

/**
 * Pure: the health of every device kubelet may ask about: each device of the pool is Healthy; each device of
 * a prepared claim that is not present (unplugged) is Unhealthy until the same device (stable ID) returns.
 */
export function devicesHealth(present: ReadonlyMap<string, Device>, claims: readonly PreparedClaim[]): DeviceHealth[] {
  const health = new Map<string, DeviceHealth>()
  for (const [name, device] of present) health.set(name, {device: name, healthy: true, message: `present as ${device.devNode}`})
  for (const claim of claims) {
    for (const d of claim.devices) {
      if (!health.has(d.device)) health.set(d.device, {device: d.device, healthy: false, message: `unplugged: device ${d.device} (${d.stableId}) is not present on the node`})
    }
  }
  return [...health.values()].sort((a, b) => a.device.localeCompare(b.device))
}

/** A condition of a claim's device (metav1.Condition). */
export interface DeviceCondition {
  readonly type: 'Ready'
  readonly status: 'True' | 'False'
  readonly reason: 'DevicePresent' | 'DeviceUnplugged'
  readonly message: string
  readonly lastTransitionTime: string
}

/** One entry of a ResourceClaim's status.devices, as this driver writes it. */
export interface ClaimDeviceStatus {
  readonly driver: string
  readonly pool: string
  readonly device: string
  readonly conditions: readonly DeviceCondition[]
  /** Where the device is now, for whoever reads the claim: its node in the container follows the kernel's name. */
  readonly data?: {readonly devNode: string; readonly kernelName: string}
}

/**
 * Pure: the status.devices entries of a prepared claim: each device Ready while present (with where it is),
 * not Ready while unplugged. The transition time stays what `previous` says while the status does not change.
 */
export function claimDeviceStatuses(
  claim: PreparedClaim,
  nodeName: string,
  present: ReadonlyMap<string, Device>,
  now: string,
  previous: ReadonlyMap<string, DeviceCondition> = new Map(),
): ClaimDeviceStatus[] {
  return claim.devices.map((d) => {
    const device = present.get(d.device)
    const status = device === undefined ? 'False' : 'True'
    const before = previous.get(d.device)
    const condition: DeviceCondition =
      device === undefined
        ? {
            lastTransitionTime: before?.status === status ? before.lastTransitionTime : now,
            message: `device ${d.stableId} was unplugged; the containers of the claim get it back when it is plugged in again`,
            reason: 'DeviceUnplugged',
            status,
            type: 'Ready',
          }
        : {lastTransitionTime: before?.status === status ? before.lastTransitionTime : now, message: `present as ${device.devNode}`, reason: 'DevicePresent', status, type: 'Ready'}
    return {
      conditions: [condition],
      data: device === undefined ? undefined : {devNode: device.devNode, kernelName: device.devName},
      device: d.device,
      driver: draDriver,
      pool: nodeName,
    }
  })
}
