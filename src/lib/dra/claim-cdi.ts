import {mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import type {Device} from '../devices/types.js'
import {writeFileAtomic} from '../sys/atomic-write.js'
import {cdiVersion} from '../plugins/cdi-spec.js'
import type {PreparedDevice} from './prepared-claims.js'

/**
 * The CDI kind of claim devices. Its vendor part is a domain of its own, so that it never meets the
 * device plugins' per-class kinds (`devices.nfdctl.io/<class>`) in a runtime's CDI registry.
 */
export const claimCdiKind = 'dra.devices.nfdctl.io/claim'

/** The CDI device name of one device of one claim: unique on the node, as a registry needs. */
export const claimCdiDevice = (claimUid: string, device: string): string => `${claimUid}-${device}`

/** The fully qualified CDI device ID kubelet hands the runtime. */
export const claimCdiId = (claimUid: string, device: string): string => `${claimCdiKind}=${claimCdiDevice(claimUid, device)}`

/** The spec file of a claim: one per claim, so that unpreparing removes exactly its devices. */
export const claimCdiFile = (cdiDir: string, claimUid: string): string => join(cdiDir, `dra.devices.nfdctl.io-claim-${claimUid}.json`)

/**
 * The environment variable that marks a container as holding one device of a claim: its name from the
 * device name (a DNS label, so upper-casing and dashes to underscores are one to one), its value the claim's
 * UID. The agent reads it back from the container's OCI spec to give the device again after a re-plug.
 */
export const claimDeviceEnv = (device: string): string => `NFDCTL_DRA_DEVICE_${device.toUpperCase().replaceAll('-', '_')}`

export interface ClaimCdiSpec {
  cdiVersion: string
  kind: string
  devices: Array<{
    name: string
    containerEdits: {
      env: string[]
      deviceNodes: Array<{path: string; hostPath: string; type: 'b' | 'c'; major: number; minor: number; permissions: string}>
    }
  }>
}

/** Pure: a claim's CDI spec: per device its node at the kernel's path, with the class's access, and the marker variable. */
export function claimCdiSpec(claimUid: string, devices: ReadonlyArray<{readonly prepared: PreparedDevice; readonly device: Device}>): ClaimCdiSpec {
  return {
    cdiVersion,
    devices: devices.map(({device, prepared}) => ({
      containerEdits: {
        deviceNodes: [{hostPath: device.devNode, major: device.major, minor: device.minor, path: device.devNode, permissions: prepared.access, type: device.type === 'block' ? 'b' : 'c'}],
        env: [`${claimDeviceEnv(prepared.device)}=${claimUid}`],
      },
      name: claimCdiDevice(claimUid, prepared.device),
    })),
    kind: claimCdiKind,
  }
}

/** Writes a claim's spec atomically: a runtime reading the directory never sees half a file. */
export async function writeClaimCdi(cdiDir: string, claimUid: string, spec: ClaimCdiSpec): Promise<void> {
  await mkdir(cdiDir, {recursive: true})
  await writeFileAtomic(claimCdiFile(cdiDir, claimUid), `${JSON.stringify(spec, null, 2)}\n`)
}

export async function removeClaimCdi(cdiDir: string, claimUid: string): Promise<void> {
  await rm(claimCdiFile(cdiDir, claimUid), {force: true})
}
