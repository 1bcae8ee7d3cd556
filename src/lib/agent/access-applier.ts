import {stat} from 'node:fs/promises'

import {devicePrograms, replaceDevicePrograms} from '../runtime/device-bpf.js'
import {allowDevice, denyDevice, readDeviceRules, type DeviceControl} from '../runtime/device-cgroup.js'
import type {DeviceProgramRule} from '../runtime/device-program.js'
import {createDeviceNode, removeDeviceNode} from '../sys/path-inside.js'
import {ruleOf, type AccessChange, type DeviceAccess} from './container-access.js'

/**
 * The class devices a container has now, with their access: on v1 the specific rules of its devices
 * cgroup that name a device nfdctl knows (present or seen before); on v2 the same rules read back from its
 * device program. Wildcard and unknown rules are not ours.
 */
export async function currentAccess(control: DeviceControl, known: ReadonlyMap<string, DeviceAccess['device']>): Promise<Map<string, DeviceAccess>> {
  const rules = control.mode === 'v1' ? (await readDeviceRules(control.dir)).map((r) => ({...r, allow: true})) : programRules(control.dir)
  const current = new Map<string, DeviceAccess>()
  for (const rule of rules) {
    if (!rule.allow || rule.type === 'a' || rule.major === '*' || rule.minor === '*') continue
    const device = known.get(`${rule.type}${rule.major}:${rule.minor}`)
    if (device !== undefined) current.set(device.id, {access: rule.access, device})
  }
  return current
}

/** The rules of the one device program a cgroup v2 directory has (none: nothing granted yet). */
function programRules(dir: string): readonly DeviceProgramRule[] {
  const programs = devicePrograms(dir)
  if (programs.length === 0) return []
  if (programs.length > 1) throw new UnsupportedProgramError(`${programs.length} device programs are attached to ${dir}; nfdctl replaces only one (runc's, or its own)`)
  const [program] = programs
  if (program.unreadable !== undefined) throw new UnsupportedProgramError(`the device program on ${dir} (id ${program.id}) cannot be read (${program.unreadable}: a security policy?); left as it is`)
  if (program.rules === undefined) throw new UnsupportedProgramError(`the device program on ${dir} ("${program.name}", id ${program.id}) is not of runc's shape; left as it is`)
  return program.rules.rules
}

/** A container whose device program nfdctl cannot read, so does not replace. */
export class UnsupportedProgramError extends Error {}

export interface V2Access {
  /** The container's own rules (OCI linux.resources.devices), without the class devices nfdctl manages. */
  readonly base: readonly DeviceProgramRule[]
  /** Every class device it should have. */
  readonly wanted: Iterable<DeviceAccess>
}

/**
 * Applies a change to one running container: revokes first, then grants. On v1 the rule (deny, allow)
 * goes to its devices cgroup; on v2 its device program is replaced by one with its own rules plus the
 * wanted class devices, never more (and on a hybrid host its v1 cgroup gets the rule too, as both must
 * allow). The device node inside the container's root goes on revoke, and comes first on grant, with the
 * host node's mode and owner. Every step is tried; the failures are thrown together.
 */
export async function applyAccess(pid: number, control: DeviceControl, change: AccessChange, v2?: V2Access): Promise<void> {
  const root = `/proc/${pid}/root`
  const v1Dir = control.mode === 'v1' ? control.dir : control.v1Dir
  const failures: string[] = []
  for (const access of change.revoke) {
    try {
      if (v1Dir !== undefined) await denyDevice(v1Dir, ruleOf(access))
      removeDeviceNode(root, access.device.devNode, access.device.major, access.device.minor)
    } catch (error) {
      failures.push(`revoke ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  if (control.mode === 'v2') {
    if (v2 === undefined) throw new Error('cgroup v2: the container\'s own rules are needed to replace its device program')
    try {
      // Before the nodes are made: a grant is usable once both exist, a revoke took effect above.
      replaceDevicePrograms(control.dir, [...v2.base, ...[...v2.wanted].map((a) => ({...ruleOf(a), allow: true}))])
    } catch (error) {
      failures.push(`device program of ${control.dir}: ${(error as Error).message}`)
    }
  }
  for (const access of change.grant) {
    try {
      const host = await stat(access.device.devNode).catch(() => undefined)
      createDeviceNode(root, {
        gid: host?.gid ?? 0, major: access.device.major, minor: access.device.minor, mode: host === undefined ? 0o660 : host.mode & 0o777,
        path: access.device.devNode, type: access.device.type, uid: host?.uid ?? 0,
      })
      if (v1Dir !== undefined) await allowDevice(v1Dir, ruleOf(access))
    } catch (error) {
      failures.push(`grant ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  if (failures.length > 0) throw new Error(failures.join('; '))
}
