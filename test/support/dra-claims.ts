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

/**
 * The ResourceClaim kube-scheduler v1.37 makes for a pod `pod` asking by limit for `devices.length` devices
 * of class `className` in its first container (KEP-5004; pkg/scheduler/framework/plugins/dynamicresources/
 * extendeddynamicresources.go): named after the pod, annotated, owned by the pod, one request per container
 * and resource (`container-<i>-request-<j>`, an exact count), allocated `devices` of `node`'s pool and
 * reserved for the pod.
 */
export function extendedResourceClaim(uid: string, pod: string, devices: readonly Device[], className: string, node: string): ResourceClaimObject {
  const request = 'container-0-request-0'
  const claim = {
    metadata: {
      annotations: {'resource.kubernetes.io/extended-resource-claim': 'true'},
      name: `${pod}-extended-resources-x7k2p`,
      namespace: 'lab',
      ownerReferences: [{apiVersion: 'v1', controller: true, kind: 'Pod', name: pod, uid: `pod-${uid}`}],
      uid,
    },
    spec: {devices: {requests: [{exactly: {allocationMode: 'ExactCount', count: devices.length, deviceClassName: draClassName(className)}, name: request}]}},
    status: {
      allocation: {devices: {results: devices.map((device) => ({device: draNameOf(device), driver: draDriver, pool: node, request}))}},
      reservedFor: [{name: pod, resource: 'pods', uid: `pod-${uid}`}],
    },
  }
  return claim
}
