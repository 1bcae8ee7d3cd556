import {appendFile, readFile} from 'node:fs/promises'
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
  return text.split('\n').filter((l) => l.trim() !== '').map((line) => {
    const match = /^([abc]) (\*|\d+):(\*|\d+) ([rwm]+)$/.exec(line.trim())
    if (!match) throw new Error(`unexpected devices.list line "${line}"`)
    const number = (s: string): number | '*' => (s === '*' ? '*' : Number(s))
    return {access: match[4], major: number(match[2]), minor: number(match[3]), type: match[1] as DeviceRule['type']}
  })
}

/** Where a process's device access is decided. */
export type DeviceControl =
  | {readonly mode: 'v1'; readonly dir: string}
  | {readonly mode: 'v2'; readonly dir: string}

/**
 * The device cgroup of a process, from /proc/<pid>/cgroup and the mounted hierarchies: on cgroup v1 the
 * `devices` controller's directory (rules in devices.allow/deny); otherwise the unified (v2) directory, where
 * device access is a BPF program (cgroup v2 support is its own piece of work).
 */
export async function deviceControlOf(pid: number, procRoot = '/proc'): Promise<DeviceControl> {
  const [cgroups, mounts] = await Promise.all([readFile(join(procRoot, String(pid), 'cgroup'), 'utf8'), readFile(join(procRoot, 'self', 'mounts'), 'utf8')])
  const mountOf = (predicate: (type: string, options: string[]) => boolean): string | undefined =>
    mounts.split('\n').map((l) => l.split(' ')).find((f) => f.length > 3 && predicate(f[2], f[3].split(',')))?.[1]
  for (const line of cgroups.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? []
    if (controllers?.split(',').includes('devices')) {
      const root = mountOf((type, options) => type === 'cgroup' && options.includes('devices'))
      if (root !== undefined) return {dir: join(root, path), mode: 'v1'}
    }
  }
  const unified = /^0::(.*)$/m.exec(cgroups)?.[1]
  const root = mountOf((type) => type === 'cgroup2')
  if (unified === undefined || root === undefined) throw new Error(`process ${pid} has neither a v1 devices cgroup nor a cgroup v2 one`)
  return {dir: join(root, unified), mode: 'v2'}
}

/** The rules in force for a v1 devices cgroup. */
export async function readDeviceRules(dir: string): Promise<DeviceRule[]> {
  return parseDeviceRules(await readFile(join(dir, 'devices.list'), 'utf8'))
}

/** Grants a rule on cgroup v1 (takes effect at the next open(2); open file descriptors are not checked again). */
export async function allowDevice(dir: string, rule: DeviceRule): Promise<void> {
  await appendFile(join(dir, 'devices.allow'), formatRule(rule))
}

/** Withdraws an exception granted before; it cannot carve a device out of a wildcard rule. */
export async function denyDevice(dir: string, rule: DeviceRule): Promise<void> {
  await appendFile(join(dir, 'devices.deny'), formatRule(rule))
}
