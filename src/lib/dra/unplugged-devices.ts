import type {Device, DeviceClass} from '../devices/types.js'
import {parseDurationMs} from '../duration.js'
import {draDriver, sliceDeviceOf, type DeviceTaint, type NodeDevices, type PoolMember, type SliceDevice} from './resource-slices.js'

/** The taint an unplugged device carries in the slice (KEP-5055): a label name in the driver's domain. */
export const unpluggedTaintKey = `${draDriver}/unplugged`

/**
 * How many unplugged devices a node's pool keeps listing, the most recently gone first (as the device
 * plugin remembers 64 gone devices): a node where devices come and go under ever new serials does not
 * grow its slices without end.
 */
export const goneDevicesKept = 64

/** A toleration of a claim's request (resource.k8s.io/v1 DeviceToleration). */
export interface DeviceToleration {
  readonly key?: string
  /** Equal (the default) or Exists. */
  readonly operator?: string
  readonly value?: string
  /** NoSchedule, NoExecute, or empty for both. */
  readonly effect?: string
}

/**
 * Pure: whether a request's tolerations let the scheduler allocate an unplugged device (its NoSchedule taint
 * `devices.nfdctl.io/unplugged`, value empty), as Kubernetes matches them: Exists with no key tolerates every
 * taint; an empty effect tolerates both effects.
 */
export function toleratesUnplugged(tolerations: readonly DeviceToleration[] | undefined): boolean {
  return (tolerations ?? []).some((t) => {
    const key = t.operator === 'Exists' ? (t.key ?? '') === '' || t.key === unpluggedTaintKey : t.key === unpluggedTaintKey && (t.value ?? '') === ''
    return key && ((t.effect ?? '') === '' || t.effect === 'NoSchedule')
  })
}

/** A device of the pool that was unplugged: listed as last seen, tainted, until it is back or forgotten. */
export interface GoneDevice extends PoolMember {
  /** When it went (ms since the epoch). */
  readonly goneAt: number
}

/** What an unplug of a class's device does: evict its pods (NoExecute) this long after it went, or never. */
export interface UnpluggedPolicy {
  readonly noExecuteAfterMs?: number
}

/** Pure: a class's unplug policy from spec.unplugged (absent: NoSchedule, never NoExecute). */
export function unpluggedPolicyOf(deviceClass: DeviceClass): UnpluggedPolicy {
  const spec = deviceClass.spec.unplugged
  if (spec?.effect !== 'NoExecute') return {}
  // The CRD's pattern admits only durations parseDurationMs reads; absent is 0s.
  return {noExecuteAfterMs: parseDurationMs(spec.noExecuteAfter ?? '0s') ?? 0}
}

/**
 * Pure: the devices remembered as gone after the pool went from `before` to `after`. A device that left
 * the pool is gone only when it left the node (`onNode` no longer has it, by kernel ID): one a class edit
 * left out, or that two classes now fight over, is simply out, as it is not unplugged. A device back in
 * the pool is forgotten, and so are a gone device's classes that are no longer DRA classes of the node (the
 * device with them); past `keep`, the longest gone go first.
 */
export function goneDevicesOf(options: {
  readonly previous: ReadonlyMap<string, GoneDevice>
  readonly before: NodeDevices
  readonly after: NodeDevices
  readonly onNode: (device: Device) => boolean
  readonly draClasses: ReadonlySet<string>
  readonly now: number
  readonly keep?: number
}): Map<string, GoneDevice> {
  const {after, before, draClasses, now, onNode, previous} = options
  const gone = new Map<string, GoneDevice>()
  for (const [name, entry] of previous) if (!after.members.has(name)) gone.set(name, entry)
  for (const [name, member] of before.members) {
    if (after.members.has(name) || onNode(member.device)) continue
    gone.set(name, {...member, goneAt: now})
  }
  const kept: Array<[string, GoneDevice]> = []
  for (const [name, entry] of gone) {
    const classes = entry.classes.filter((c) => draClasses.has(c))
    if (classes.length > 0) kept.push([name, classes.length === entry.classes.length ? entry : {...entry, classes}])
  }
  kept.sort(([a, x], [b, y]) => y.goneAt - x.goneAt || a.localeCompare(b))
  return new Map(kept.slice(0, options.keep ?? goneDevicesKept))
}

/** metav1.Time as the API server writes it back (RFC 3339, whole seconds): a taint read back compares equal. */
const apiTime = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')

/**
 * Pure: the taint of a device gone at `goneAt`, in these classes, at `now`. NoSchedule until the
 * strictest class's noExecuteAfter has passed, then NoExecute; timeAdded is when the effect began (as a
 * DeviceTaintRule's is), so that a toleration's tolerationSeconds count from the eviction taint.
 */
export function unpluggedTaintOf(goneAt: number, policies: readonly UnpluggedPolicy[], now: number): {taint: DeviceTaint; changesAt?: number} {
  const graces = policies.flatMap((p) => (p.noExecuteAfterMs === undefined ? [] : [p.noExecuteAfterMs]))
  const evictAt = graces.length === 0 ? undefined : goneAt + Math.min(...graces)
  if (evictAt !== undefined && now >= evictAt) return {taint: {effect: 'NoExecute', key: unpluggedTaintKey, timeAdded: apiTime(evictAt)}}
  return {changesAt: evictAt, taint: {effect: 'NoSchedule', key: unpluggedTaintKey, timeAdded: apiTime(goneAt)}}
}

/**
 * Pure: the slice devices of a pool: the present ones as they are, the gone ones as last seen with the
 * unplugged taint, in name order (a present device shadows a gone one of its name). `changesAt` is the
 * earliest time a gone device's taint turns NoExecute, when the pool must be published again.
 */
export function poolDevicesOf(
  present: NodeDevices,
  gone: ReadonlyMap<string, GoneDevice>,
  policyOf: (className: string) => UnpluggedPolicy,
  now: number,
): {devices: SliceDevice[]; changesAt?: number} {
  const devices = [...present.devices]
  let changesAt: number | undefined
  for (const [name, entry] of gone) {
    if (present.members.has(name)) continue
    const {changesAt: at, taint} = unpluggedTaintOf(entry.goneAt, entry.classes.map(policyOf), now)
    if (at !== undefined) changesAt = Math.min(at, changesAt ?? at)
    devices.push({...sliceDeviceOf(entry.device, entry.classes, entry.identity).device, taints: [taint]})
  }
  devices.sort((a, b) => a.name.localeCompare(b.name))
  return {changesAt, devices}
}
