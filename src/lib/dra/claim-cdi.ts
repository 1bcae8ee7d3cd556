import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {claimMarkerDir} from '../devices/resource-names.js'
import type {Device} from '../devices/types.js'
import {cdiDeviceNode, cdiVersion, writeCdiSpecFile, type CdiSpec} from '../runtime/cdi-spec.js'
import type {PreparedDevice} from './prepared-claims.js'

/**
 * The CDI kind of claim devices. Its vendor part is a domain of its own, so that it never meets the
 * device plugins' per-class kinds (`devices.nfdctl.io/<class>`) in a runtime's CDI registry.
 */
export const claimCdiKind = 'dra.devices.nfdctl.io/claim'

/** The CDI device name of one device of one claim: unique on the node, as a registry needs. */
const claimCdiDevice = (claimUid: string, device: string): string => `${claimUid}-${device}`

/** The fully qualified CDI device ID kubelet hands the runtime. */
export const claimCdiId = (claimUid: string, device: string): string => `${claimCdiKind}=${claimCdiDevice(claimUid, device)}`

/** The spec file of a claim: one per claim, so that unpreparing removes exactly its devices. */
export const claimCdiFile = (cdiDir: string, claimUid: string): string => join(cdiDir, `dra.devices.nfdctl.io-claim-${claimUid}.json`)

/**
 * The second device node each claim device gets in a container, `/dev/nfdctl/claims/<claim uid>/<device>`:
 * it marks the container as holding that device of that claim. The agent reads it back from the container's
 * OCI `linux.devices` to give the device again after a re-plug. Only CDI injection (kubelet, for the
 * containers whose resources name the claim's request) puts a device node in a container's spec: a pod has
 * no field for it, so a pod cannot claim a device by writing the path itself.
 */
export const claimMarkerPath = (claimUid: string, device: string): string => `${claimMarkerDir}/${claimUid}/${device}`

/** The claim UID and device a marker path names; undefined for any other path. */
export function parseClaimMarker(path: string): {claimUid: string; device: string} | undefined {
  const match = /^\/dev\/nfdctl\/claims\/([a-f0-9-]{1,64})\/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)$/.exec(path)
  return match === null ? undefined : {claimUid: match[1], device: match[2]}
}

/** The null device (`c 1:3`): the marker of a device a container starts without. */
const nullDevice = {devNode: '/dev/null', major: 1, minor: 3, type: 'char'} as const

/**
 * Pure: a claim's CDI spec for the devices present now: per device its node at the kernel's path and the
 * marker node, both with the class's access. A device that is not present is left out, so that a container
 * created meanwhile fails to start rather than get whatever has its old numbers; except those `awaited`
 * (unplugged, their request tolerates it): each is only its marker, as the null device, so that the
 * container starts without it and the agent gives it the device when it is back.
 */
export function claimCdiSpec(claimUid: string, devices: ReadonlyArray<{readonly prepared: PreparedDevice; readonly device: Device}>, awaited: readonly PreparedDevice[] = []): CdiSpec {
  return {
    cdiVersion,
    devices: [
      ...devices.map(({device, prepared}) => ({
        containerEdits: {deviceNodes: [cdiDeviceNode(device, prepared.access), cdiDeviceNode(device, prepared.access, claimMarkerPath(claimUid, prepared.device))]},
        name: claimCdiDevice(claimUid, prepared.device),
      })),
      ...awaited.map((prepared) => ({
        containerEdits: {deviceNodes: [cdiDeviceNode(nullDevice, 'rw', claimMarkerPath(claimUid, prepared.device))]},
        name: claimCdiDevice(claimUid, prepared.device),
      })),
    ],
    kind: claimCdiKind,
  }
}

/** Writes a claim's spec (removed when it has no devices, as CDI has no empty spec). */
export async function writeClaimCdi(cdiDir: string, claimUid: string, spec: CdiSpec): Promise<void> {
  await writeCdiSpecFile(claimCdiFile(cdiDir, claimUid), spec)
}

export async function removeClaimCdi(cdiDir: string, claimUid: string): Promise<void> {
  await rm(claimCdiFile(cdiDir, claimUid), {force: true})
}
