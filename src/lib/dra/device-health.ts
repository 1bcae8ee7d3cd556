import {identitySources, stableDeviceId} from '../devices/device-identity.js'
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
 * Pure: the devices of prepared claims that the pool lacks although they are on the node: the class the claim
 * was prepared from no longer serves them (a class edit, its deletion, or the device refused, as another
 * class now matches it too). What the classes serve is what the node hands out, so the claim's containers
 * lose them as well; this tells that apart from an unplug, for the claim's status and kubelet. `onNode` is every device present, in a class or not; a stable ID is matched whichever
 * identity the class followed.
 */
export function claimedOutsideClass(claims: readonly PreparedClaim[], pool: ReadonlyMap<string, Device>, onNode: readonly Device[]): Set<string> {
  const missing = claims.flatMap((c) => c.devices).filter((d) => !pool.has(d.device))
  if (missing.length === 0) return new Set()
  const ids = new Set(onNode.flatMap((device) => identitySources.map((follows) => stableDeviceId(device, follows))))
  return new Set(missing.filter((d) => ids.has(d.stableId)).map((d) => d.device))
}

/**
 * Pure: the health of every device kubelet may ask about: each device of the pool is Healthy; each device of
 * a prepared claim that is not in the pool is Unhealthy, unplugged or (`outsideClass`) no longer in its class,
 * until the same device (stable ID) is in the pool again.
 */
export function devicesHealth(present: ReadonlyMap<string, Device>, claims: readonly PreparedClaim[], outsideClass: ReadonlySet<string> = new Set()): DeviceHealth[] {
  const health = new Map<string, DeviceHealth>()
  for (const [name, device] of present) health.set(name, {device: name, healthy: true, message: `present as ${device.devNode}`})
  for (const claim of claims) {
    for (const d of claim.devices) {
      if (health.has(d.device)) continue
      const message = outsideClass.has(d.device)
        ? `not in class: device ${d.device} (${d.stableId}) is on the node but DeviceClass (devices.nfdctl.io) ${d.className} no longer serves it`
        : `unplugged: device ${d.device} (${d.stableId}) is not present on the node`
      health.set(d.device, {device: d.device, healthy: false, message})
    }
  }
  return [...health.values()].sort((a, b) => a.device.localeCompare(b.device))
}

/** A condition of a claim's device (metav1.Condition). */
export interface DeviceCondition {
  readonly type: 'Ready'
  readonly status: 'True' | 'False'
  readonly reason: 'DevicePresent' | 'DeviceUnplugged' | 'DeviceNotInClass'
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
 * Pure: the status.devices entries of a prepared claim: each device Ready while present in its class (with
 * where it is), not Ready while unplugged or (`outsideClass`) no longer in its class. The transition time
 * stays what `previous` says while the status does not change.
 */
export function claimDeviceStatuses(
  claim: PreparedClaim,
  nodeName: string,
  present: ReadonlyMap<string, Device>,
  now: string,
  previous: ReadonlyMap<string, DeviceCondition> = new Map(),
  outsideClass: ReadonlySet<string> = new Set(),
): ClaimDeviceStatus[] {
  return claim.devices.map((d) => {
    const device = present.get(d.device)
    const status = device === undefined ? 'False' : 'True'
    const before = previous.get(d.device)
    const lastTransitionTime = before?.status === status ? before.lastTransitionTime : now
    const condition: DeviceCondition =
      device !== undefined
        ? {lastTransitionTime, message: `present as ${device.devNode}`, reason: 'DevicePresent', status, type: 'Ready'}
        : outsideClass.has(d.device)
          ? {
              lastTransitionTime,
              message: `device ${d.stableId} is on the node but DeviceClass (devices.nfdctl.io) ${d.className} no longer serves it (edited, deleted, or the device refused: see the class's status); the containers of the claim get it back when the class serves it again`,
              reason: 'DeviceNotInClass',
              status,
              type: 'Ready',
            }
          : {
              lastTransitionTime,
              message: `device ${d.stableId} was unplugged; the containers of the claim get it back when it is plugged in again`,
              reason: 'DeviceUnplugged',
              status,
              type: 'Ready',
            }
    return {
      conditions: [condition],
      data: device === undefined ? undefined : {devNode: device.devNode, kernelName: device.devName},
      device: d.device,
      driver: draDriver,
      pool: nodeName,
    }
  })
}
