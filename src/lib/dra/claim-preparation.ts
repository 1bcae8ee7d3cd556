import type {Device, DeviceClass} from '../devices/types.js'
import {stableDeviceId} from '../devices/device-identity.js'
import {claimCdiId} from './claim-cdi.js'
import {className as nfdctlClassName} from './dra-device-classes.js'
import type {PreparedClaim, PreparedDevice} from './prepared-claims.js'
import {draDeviceName, draDriver, type PoolMember} from './resource-slices.js'
import {toleratesUnplugged, type DeviceToleration} from './unplugged-devices.js'

/** The parts of a resource.k8s.io/v1 ResourceClaim the driver reads. */
export interface ResourceClaimObject {
  readonly metadata: {readonly uid?: string; readonly name: string; readonly namespace?: string}
  readonly spec?: {
    readonly devices?: {
      readonly requests?: ReadonlyArray<{
        readonly name: string
        readonly exactly?: {readonly deviceClassName?: string; readonly adminAccess?: boolean; readonly tolerations?: readonly DeviceToleration[]}
        readonly firstAvailable?: ReadonlyArray<{readonly name: string; readonly deviceClassName?: string; readonly tolerations?: readonly DeviceToleration[]}>
      }>
    }
  }
  readonly status?: {
    readonly allocation?: {
      readonly devices?: {
        readonly results?: ReadonlyArray<{readonly request: string; readonly driver: string; readonly pool: string; readonly device: string; readonly adminAccess?: boolean}>
      }
    }
    readonly reservedFor?: ReadonlyArray<{readonly resource?: string; readonly name?: string; readonly uid?: string}>
  }
}

export interface ClaimPreparationInput {
  readonly claim: ResourceClaimObject
  /** The UID kubelet asked for: a claim deleted and re-created under the same name is another claim. */
  readonly uid: string
  readonly nodeName: string
  /** The node's classes, by name. */
  readonly classes: ReadonlyMap<string, DeviceClass>
  /** The devices of a class present now. */
  readonly members: (className: string) => readonly Device[]
  /** An unplugged device the pool still lists (tainted), by DRA device name, with its classes. */
  readonly unplugged?: (device: string) => PoolMember | undefined
}

/** The claim to record, and its devices present now (an unplugged one its request tolerates is in `prepared` only). */
export type ClaimPreparation = {readonly prepared: PreparedClaim; readonly devices: ReadonlyArray<{readonly prepared: PreparedDevice; readonly device: Device}>} | {readonly error: string}

/**
 * Pure: what preparing a claim means on this node: the devices of this driver that the scheduler allocated
 * from this node's pool, each checked to be present and in the class its request named (the claim is the
 * API server's, but a device name in it is still only a name: nothing outside the class is handed out).
 * Anything that does not hold is the claim's error, for kubelet to retry; other claims are not affected.
 * One exception: a device that is unplugged (the pool lists it, tainted, in the request's class) when its
 * request tolerates the unplugged taint is prepared without being present: the claim's containers start
 * with the devices that are, and get it when it is back.
 */
export function prepareClaim(input: ClaimPreparationInput): ClaimPreparation {
  const {claim, nodeName} = input
  const ref = `ResourceClaim ${claim.metadata.namespace}/${claim.metadata.name}`
  if (claim.metadata.uid !== input.uid) return {error: `${ref} has UID ${claim.metadata.uid}, not ${input.uid}: it was deleted and created again; kubelet retries with the new one`}
  const results = (claim.status?.allocation?.devices?.results ?? []).filter((r) => r.driver === draDriver)
  if (claim.status?.allocation === undefined) return {error: `${ref} is not allocated yet`}
  if (results.length === 0) return {error: `${ref} has no device of driver ${draDriver} allocated`}
  const devices: Array<{prepared: PreparedDevice; device: Device}> = []
  const awaited: PreparedDevice[] = []
  for (const result of results) {
    if (result.pool !== nodeName) return {error: `${ref} was allocated device ${result.device} of pool ${result.pool}, which is not this node's (${nodeName})`}
    const requested = requestClass(claim, result.request)
    const name = requested === undefined ? undefined : nfdctlClassName(requested)
    const deviceClass = name === undefined ? undefined : input.classes.get(name)
    if (deviceClass === undefined || deviceClass.spec.allocation !== 'DRA') {
      return {error: `${ref}'s request ${result.request} names DeviceClass ${requested ?? '(none)'}, which is not a DRA class of ${draDriver} on node ${nodeName}`}
    }
    const tolerates = toleratesUnplugged(requestTolerations(claim, result.request))
    const present = input.members(deviceClass.metadata.name).find((d) => draDeviceName(stableDeviceId(d, deviceClass.spec.identity)) === result.device)
    const gone = present === undefined && tolerates ? input.unplugged?.(result.device) : undefined
    const device = present ?? (gone?.classes.includes(deviceClass.metadata.name) ? gone.device : undefined)
    if (device === undefined) return {error: `device ${result.device} of ${ref} is not present on node ${nodeName} (unplugged, or no longer in class ${deviceClass.metadata.name})`}
    const prepared: PreparedDevice = {
      access: deviceClass.spec.permissions,
      adminAccess: result.adminAccess === true ? true : undefined,
      cdiId: claimCdiId(input.uid, result.device),
      className: deviceClass.metadata.name,
      device: result.device,
      request: result.request,
      stableId: stableDeviceId(device, deviceClass.spec.identity),
      toleratesUnplugged: tolerates ? true : undefined,
    }
    if (present === undefined) awaited.push(prepared)
    else devices.push({device: present, prepared})
  }
  const pods = (claim.status?.reservedFor ?? []).filter((r) => r.resource === 'pods' && r.uid !== undefined).map((r) => r.uid!)
  return {
    devices,
    prepared: {devices: [...devices.map((d) => d.prepared), ...awaited], name: claim.metadata.name, namespace: claim.metadata.namespace ?? '', pods, uid: input.uid},
  }
}

/** The request (or subrequest) a result's request name (`req` or `req/subrequest`) names. */
function requestOf(claim: ResourceClaimObject, request: string): {readonly deviceClassName?: string; readonly tolerations?: readonly DeviceToleration[]} | undefined {
  const [main, sub] = request.split('/', 2)
  const found = claim.spec?.devices?.requests?.find((r) => r.name === main)
  if (found === undefined) return undefined
  if (sub === undefined) return found.exactly
  return found.firstAvailable?.find((s) => s.name === sub)
}

/** The resource.k8s.io DeviceClass a result's request named. */
const requestClass = (claim: ResourceClaimObject, request: string): string | undefined => requestOf(claim, request)?.deviceClassName

const requestTolerations = (claim: ResourceClaimObject, request: string): readonly DeviceToleration[] | undefined => requestOf(claim, request)?.tolerations
