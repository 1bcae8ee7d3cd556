import type {IdentitySource} from './device-identity.js'

/** A character or block device node as the kernel describes it (sysfs and uevents). */
export interface Device {
  /** Stable id: `c<major>:<minor>` or `b<major>:<minor>` (the udev database's naming). */
  readonly id: string
  readonly type: 'block' | 'char'
  readonly major: number
  readonly minor: number
  /** The kernel's name, DEVNAME without /dev/, e.g. "ttyUSB0", "input/event3", "loop0". */
  readonly devName: string
  /** The device node path, "/dev/" + devName. */
  readonly devNode: string
  /** The sysfs directory name, e.g. "loop0". */
  readonly kernelName: string
  /** Subsystem: "tty", "block", "mem", "input", … */
  readonly subsystem: string
  /** DEVTYPE when the kernel sets one ("disk", "partition", "usb_device"). */
  readonly devType?: string
  /** sysfs path below /sys, e.g. "/devices/virtual/block/loop0". */
  readonly devPath: string
  /** The uevent file's variables, overlaid by udev database properties (E: lines) when present. */
  readonly properties: Readonly<Record<string, string>>
}

/** Reads a sysfs attribute of the device, or of its nearest parent that has it; undefined when none has. */
export type AttributeReader = (device: Device, name: string) => string | undefined

export const deviceClassGroup = 'devices.nfdctl.io'
export const deviceClassVersion = 'v1alpha1'
export const deviceClassApiVersion = `${deviceClassGroup}/${deviceClassVersion}` as const

/** DeviceClass (devices.nfdctl.io/v1alpha1): which devices form the class, on which nodes. */
export interface DeviceClass {
  readonly apiVersion: typeof deviceClassApiVersion
  readonly kind: 'DeviceClass'
  readonly metadata: {readonly name: string; readonly generation?: number; readonly uid?: string}
  readonly spec: DeviceClassSpec
}

export interface DeviceClassSpec {
  readonly nodeSelector?: LabelSelector
  /**
   * Who may take the class by pod annotation: pods of the namespaces the selector selects. Absent: nobody
   * (the annotation is refused); an empty selector admits every namespace. Allocation Class only.
   */
  readonly annotationAccess?: {readonly namespaceSelector: LabelSelector}
  /** A device is in the class when ANY rule matches; within a rule, every field must match. */
  readonly match: readonly MatchRule[]
  /** Subset of r, w, m; default "rw". */
  readonly permissions: string
  /**
   * Class: a container gets every device of the class; Device: each device is one schedulable unit of the
   * class's device plugin; DRA: each device is allocated through ResourceClaims (`devices agent --dra`).
   */
  readonly allocation: 'Class' | 'Device' | 'DRA'
  /** Class mode: how many containers may hold the class at once (default 1). */
  readonly capacity: number
  /** What a device is followed by across re-plugs (default Serial: its serial number when it has one, else its port). */
  readonly identity?: IdentitySource
  /**
   * DRA only: how the ResourceSlice lists an unplugged device of the class (kept, tainted devices.nfdctl.io/unplugged,
   * until it is back). Absent: effect NoSchedule.
   */
  readonly unplugged?: UnpluggedSpec
  /**
   * Allow: the class may serve host-critical devices (/dev/mem, /dev/kmem, /dev/port, /dev/kmsg, block
   * devices that back the node's mounts or swap). Absent or Refuse: they are left out and reported.
   */
  readonly hostCritical?: 'Allow' | 'Refuse'
}

export interface UnpluggedSpec {
  /** NoSchedule: no new claim gets the device. NoExecute: also the pods holding it are evicted, after noExecuteAfter. */
  readonly effect: 'NoExecute' | 'NoSchedule'
  /** effect NoExecute only: a duration such as 30s, 5m or 1h30m (hours, minutes, seconds); absent means at once. */
  readonly noExecuteAfter?: string
}

export interface MatchRule {
  /** Exact subsystem name. */
  readonly subsystem?: string
  /** Glob over the kernel name (DEVNAME without /dev/). */
  readonly devName?: string
  /** uevent/udev properties; values are globs. */
  readonly properties?: Readonly<Record<string, string>>
  /** sysfs attributes of the device or any parent; values are globs. */
  readonly attributes?: Readonly<Record<string, string>>
}

export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>
  readonly matchExpressions?: ReadonlyArray<{readonly key: string; readonly operator: 'DoesNotExist' | 'Exists' | 'In' | 'NotIn'; readonly values?: readonly string[]}>
}

/** One problem in a DeviceClass, at a field path such as `spec.match[0].devName`. */
export interface ValidationIssue {
  readonly path: string
  readonly message: string
}
