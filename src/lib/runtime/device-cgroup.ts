import {appendFileSync, readFileSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

/** One device cgroup rule, as `devices.allow`, `devices.deny` and `devices.list` spell it: `b 7:0 rw`. */
export interface DeviceRule {
  readonly type: 'a' | 'b' | 'c'
  readonly major: number | '*'
  readonly minor: number | '*'
  /** Subset of r, w, m. */
  readonly access: string
}

export const formatRule = (r: DeviceRule): string => `${r.type} ${r.major}:${r.minor} ${r.access}`

/** Parses `devices.list` (one rule a line; `a *:* rwm` when everything is allowed). */
export function parseDeviceRules(text: string): DeviceRule[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      const match = /^([abc]) (\*|\d+):(\*|\d+) ([rwm]+)$/.exec(line.trim())
      if (!match) throw new Error(`unexpected devices.list line "${line}"`)
      const number = (s: string): number | '*' => (s === '*' ? '*' : Number(s))
      return {access: match[4], major: number(match[2]), minor: number(match[3]), type: match[1] as DeviceRule['type']}
    })
}

/**
 * Where a process's device access is decided: a v1 devices cgroup (rules in devices.allow/deny), or a
 * cgroup v2 directory whose BPF device program decides; on a hybrid host (v1 devices controller and a cgroup2
 * hierarchy both) the v1 cgroup has a say as well, as both must allow.
 */
export type DeviceControl = {readonly mode: 'v1'; readonly dir: string} | {readonly mode: 'v2'; readonly dir: string; readonly v1Dir?: string}

export type CgroupMode = 'auto' | 'v1' | 'v2'

export interface DeviceControlOptions {
  /** auto: v2 when the process's cgroup2 directory carries a device program or there is no v1 devices controller. */
  readonly mode?: CgroupMode
  readonly procRoot?: string
  /** Whether a cgroup2 directory has a device program attached (BPF_PROG_QUERY). */
  readonly hasDeviceProgram?: (dir: string) => boolean
  /**
   * The container the process should belong to: every cgroup returned must be its own (`cgroup`, from its
   * OCI linux.cgroupsPath through cgroupOfSpec; or, where the spec names none, one whose last component
   * holds its id). Otherwise CgroupMismatchError: the PID is not (or no longer) the container's.
   */
  readonly container?: {readonly id: string; readonly cgroup?: string}
}

/** A process that is not in the container's cgroup: a PID reused, or a process that moved itself. */
export class CgroupMismatchError extends Error {}

/**
 * The cgroup an OCI spec's linux.cgroupsPath names, as /proc/<pid>/cgroup writes it: a cgroupfs path as it
 * is (/kubepods/besteffort/pod<uid>/<id>); systemd's "slice:prefix:name" as the scope systemd makes of it
 * (/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope).
 */
export function cgroupOfSpec(cgroupsPath: string): string {
  const systemd = /^([^:/]*):([^:]*):([^:]+)$/.exec(cgroupsPath)
  if (systemd === null) return cgroupsPath
  const [, slice, prefix, name] = systemd
  // runc's ExpandSlice: a-b-c.slice lives in /a.slice/a-b.slice/a-b-c.slice; "-.slice" is the root.
  const parent = slice === '' ? 'system.slice' : slice
  if (!parent.endsWith('.slice') || parent.includes('/')) throw new Error(`invalid systemd slice "${parent}" in cgroupsPath "${cgroupsPath}"`)
  const parts = parent === '-.slice' ? [] : parent.slice(0, -'.slice'.length).split('-')
  const slices = parts.map((_, i) => `${parts.slice(0, i + 1).join('-')}.slice`)
  const unit = name.endsWith('.slice') ? name : prefix === '' ? `${name}.scope` : `${prefix}-${name}.scope`
  return `/${[...slices, unit].join('/')}`
}

/** Whether a cgroup path from /proc/<pid>/cgroup is the container's (a cgroup namespace may show only its tail). */
export function isContainerCgroup(path: string, container: {readonly id: string; readonly cgroup?: string}): boolean {
  if (container.cgroup === undefined) return container.id !== '' && (path.split('/').at(-1) ?? '').includes(container.id)
  const expected = container.cgroup.replace(/^\/*/, '/').replace(/\/+$/, '')
  return path === expected || path.endsWith(expected)
}

/** The device cgroups of a process, from /proc/<pid>/cgroup and the mounted hierarchies, and which one decides. */
export async function deviceControlOf(pid: number, options: DeviceControlOptions = {}): Promise<DeviceControl> {
  const procRoot = options.procRoot ?? '/proc'
  const [cgroups, roots] = await Promise.all([readFile(join(procRoot, String(pid), 'cgroup'), 'utf8'), cgroupMounts(procRoot)])
  let v1Dir: string | undefined
  let v1Path: string | undefined
  for (const line of cgroups.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? []
    if (controllers?.split(',').includes('devices') && roots.v1Devices !== undefined) [v1Dir, v1Path] = [join(roots.v1Devices, path), path]
  }
  const unified = /^0::(.*)$/m.exec(cgroups)?.[1]
  const unifiedRoot = roots.unified
  const unifiedDir = unified === undefined || unifiedRoot === undefined ? undefined : join(unifiedRoot, unified)
  const control = chooseControl(pid, v1Dir, unifiedDir, options)
  const {container} = options
  if (container !== undefined) {
    const used = control.mode === 'v1' ? [v1Path] : [unified, control.v1Dir === undefined ? undefined : v1Path]
    const foreign = used.find((path) => path !== undefined && !isContainerCgroup(path, container))
    if (foreign !== undefined) {
      const expected = container.cgroup === undefined ? `one named after container ${container.id}` : `${container.cgroup} (its linux.cgroupsPath)`
      throw new CgroupMismatchError(`process ${pid} is in cgroup ${foreign}, not in container ${container.id}'s ${expected}`)
    }
  }
  return control
}

interface CgroupMounts {
  readonly v1Devices?: string
  readonly unified?: string
}

/** The host's, read once: reading a mount table waits for every mount and unmount (runc makes many while pods start). */
let hostCgroupMounts: Promise<CgroupMounts> | undefined

/** Where the v1 devices hierarchy and the cgroup2 hierarchy are mounted. */
function cgroupMounts(procRoot: string): Promise<CgroupMounts> {
  const read = async (): Promise<CgroupMounts> => {
    const mounts = (await readFile(join(procRoot, 'self', 'mounts'), 'utf8'))
      .split('\n')
      .map((l) => l.split(' '))
      .filter((f) => f.length > 3)
    return {
      unified: mounts.find((f) => f[2] === 'cgroup2')?.[1],
      v1Devices: mounts.find((f) => f[2] === 'cgroup' && f[3].split(',').includes('devices'))?.[1],
    }
  }
  if (procRoot !== '/proc') return read()
  hostCgroupMounts ??= read().catch((error: unknown) => {
    hostCgroupMounts = undefined
    throw error
  })
  return hostCgroupMounts
}

function chooseControl(pid: number, v1Dir: string | undefined, unifiedDir: string | undefined, options: DeviceControlOptions): DeviceControl {
  if (v1Dir === undefined && unifiedDir === undefined) throw new Error(`process ${pid} has neither a v1 devices cgroup nor a cgroup v2 one`)
  const mode = options.mode ?? 'auto'
  if (mode === 'v1') {
    if (v1Dir === undefined) throw new Error(`process ${pid} has no v1 devices cgroup (cgroup v2 only): use --cgroup-mode auto or v2`)
    return {dir: v1Dir, mode: 'v1'}
  }
  if (unifiedDir === undefined) {
    if (mode === 'v2') throw new Error(`process ${pid} has no cgroup v2 directory: use --cgroup-mode auto or v1`)
    return {dir: v1Dir!, mode: 'v1'}
  }
  if (mode === 'v2' || v1Dir === undefined || (options.hasDeviceProgram?.(unifiedDir) ?? false)) return {dir: unifiedDir, mode: 'v2', ...(v1Dir === undefined ? {} : {v1Dir})}
  return {dir: v1Dir, mode: 'v1'}
}

// The devices files are read and written synchronously: they answer in microseconds under the devices
// controller's own lock (never the cgroup lock that runc holds while it builds pods), and each step through
// libuv's thread pool would cost a wake-up of a worker thread and then of the event loop, which a node busy
// starting pods turns into milliseconds on a hot-plug's path.

/** The rules in force for a v1 devices cgroup. */
export async function readDeviceRules(dir: string): Promise<DeviceRule[]> {
  return parseDeviceRules(readFileSync(join(dir, 'devices.list'), 'utf8'))
}

/** Grants a rule on cgroup v1 (takes effect at the next open(2); open file descriptors are not checked again). */
export async function allowDevice(dir: string, rule: DeviceRule): Promise<void> {
  appendFileSync(join(dir, 'devices.allow'), formatRule(rule))
}

/** Withdraws an exception granted before; it cannot carve a device out of a wildcard rule. */
export async function denyDevice(dir: string, rule: DeviceRule): Promise<void> {
  appendFileSync(join(dir, 'devices.deny'), formatRule(rule))
}
