import {stableDeviceId} from '../../src/lib/devices/device-identity.js'
import type {Device} from '../../src/lib/devices/types.js'
import type {ResourceClaimObject} from '../../src/lib/dra/claim-preparation.js'
import {draClassName} from '../../src/lib/devices/resource-names.js'
import type {ClaimRef} from '../../src/lib/kubelet/dra-api.js'
import {draDeviceName, draDriver} from '../../src/lib/dra/resource-slices.js'

/** The DRA device name of a device (its stable ID, as the pool names it). */
export const draNameOf = (device: Device): string => draDeviceName(stableDeviceId(device))

/** A ResourceClaim in `lab` asking class `className` for one device, allocated `device` of `node`'s pool. */
export function allocatedClaim(uid: string, name: string, device: Device, className: string, node: string): ResourceClaimObject {
  return {
    metadata: {name, namespace: 'lab', uid},
    spec: {devices: {requests: [{exactly: {deviceClassName: draClassName(className)}, name: 'dev'}]}},
    status: {allocation: {devices: {results: [{device: draNameOf(device), driver: draDriver, pool: node, request: 'dev'}]}}, reservedFor: [{name: 'app', resource: 'pods', uid: `pod-${uid}`}]},
  }
}

/** kubelet's reference to a claim in `lab`. */
export const claimRef = (uid: string, name: string): ClaimRef => ({name, namespace: 'lab', uid})
