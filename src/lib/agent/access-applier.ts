import {statSync} from 'node:fs'

import type {ContainerHandle} from '../runtime/container-handle.js'
import {devicePrograms, replaceDeviceProgram} from '../runtime/device-bpf.js'
import {allowDevice, denyDevice, readDeviceRules, type DeviceControl} from '../runtime/device-cgroup.js'
import {ruleDeviceId, type DeviceProgramRule, type EmulatedRules} from '../runtime/device-program.js'
import {createDeviceNode, removeDeviceNode} from '../sys/device-nodes.js'
import {ruleOf, type AccessChange, type DeviceAccess} from './container-access.js'

/** What a container holds of the devices the agent manages, and on cgroup v2 the program that says so. */
export interface HeldAccess {
  /** By device id. */
  readonly devices: Map<string, DeviceAccess>
  /**
   * cgroup v2: the one device program attached, read back; a replacement is built from its rules and takes
   * the place of exactly it. Undefined when none is attached and the host is hybrid: its runtime restricts
   * devices through v1 (where the rules were read), and the v2 cgroup allows every device.
   */
  readonly program?: {readonly id: number; readonly rules: EmulatedRules}
  /**
   * A hybrid host with a program: the devices whose v1 rule and program disagree (one written, the other not,
   * when the agent was killed between them). `devices` holds what either allows.
   */
  readonly partial?: ReadonlySet<string>
}

/**
 * The devices a container has now that are the agent's (`ours` gives the device for an id, undefined for
 * every other): the specific allow rules naming them, from its v1 devices cgroup or read back from its v2
 * device program. Wildcard rules and the rules of other devices are the runtime's.
 */
export async function currentAccess(control: DeviceControl, ours: (id: string) => DeviceAccess['device'] | undefined): Promise<HeldAccess> {
  const program = control.mode === 'v2' ? attachedProgram(control) : undefined
  const v1Dir = control.mode === 'v1' ? control.dir : control.v1Dir
  const v1 = v1Dir === undefined ? undefined : await readDeviceRules(v1Dir)
  const fromProgram = program === undefined ? undefined : heldBy(program.rules.rules, ours)
  const fromV1 =
    v1 === undefined
      ? undefined
      : heldBy(
          v1.map((r) => ({...r, allow: true})),
          ours,
        )
  if (fromProgram === undefined || fromV1 === undefined) return {devices: fromProgram ?? fromV1 ?? new Map(), program}
  // Both controls restrict a hybrid host's container: what either allows is held, and where they differ both are written again.
  const devices = new Map<string, DeviceAccess>()
  const partial = new Set<string>()
  for (const id of new Set([...fromProgram.keys(), ...fromV1.keys()])) {
    const [p, v] = [fromProgram.get(id), fromV1.get(id)]
    if (p?.access !== v?.access) partial.add(id)
    const access = ['r', 'w', 'm'].filter((c) => `${p?.access ?? ''}${v?.access ?? ''}`.includes(c)).join('')
    devices.set(id, {access, device: (p ?? v)!.device})
  }
  return {devices, partial, program}
}

/** The agent's devices that specific allow rules name, by device id; wildcard rules and other devices are the runtime's. */
function heldBy(rules: readonly DeviceProgramRule[], ours: (id: string) => DeviceAccess['device'] | undefined): Map<string, DeviceAccess> {
  const devices = new Map<string, DeviceAccess>()
  for (const rule of rules) {
    if (!rule.allow || rule.type === 'a' || rule.major === '*' || rule.minor === '*') continue
    const device = ours(ruleDeviceId(rule))
    if (device !== undefined) devices.set(device.id, {access: rule.access, device})
  }
  return devices
}

/** The one device program of a cgroup v2 directory, read back; undefined for none on a hybrid host. */
function attachedProgram(control: DeviceControl & {mode: 'v2'}): HeldAccess['program'] {
  const {dir} = control
  const programs = devicePrograms(dir)
  if (programs.length === 0) {
    if (control.v1Dir !== undefined) return undefined
    throw new UnsupportedProgramError(`no device program is attached to ${dir}: the cgroup allows every device, and nfdctl only rebuilds a program its runtime attached`)
  }
  if (programs.length > 1) throw new UnsupportedProgramError(`${programs.length} device programs are attached to ${dir}; nfdctl replaces only one (runc's, or its own)`)
  const [program] = programs
  if (program.unreadable !== undefined) throw new UnsupportedProgramError(`the device program on ${dir} (id ${program.id}) cannot be read (${program.unreadable}: a security policy?); left as it is`)
  if (program.rules === undefined) throw new UnsupportedProgramError(`the device program on ${dir} ("${program.name}", id ${program.id}) is not of runc's shape; left as it is`)
  return {id: program.id, rules: program.rules}
}

/** A container whose device program nfdctl cannot read, so does not replace. */
export class UnsupportedProgramError extends Error {}

/** The device program to attach on cgroup v2, in the place of the one read (HeldAccess.program). */
export interface V2Program {
  readonly replaces: number
  /** The read program's own rules without the agent's devices (rulesWithout), then every class device wanted. */
  readonly rules: readonly DeviceProgramRule[]
}

/**
 * Applies a change to one running container: revokes first, then grants. On v1 the rule (deny, allow)
 * goes to its devices cgroup; on v2 the program read is replaced by `v2` (its own rules plus the wanted
 * class devices, never more), and on a hybrid host its v1 cgroup gets the rule too, as both must allow. The device node inside the container's root goes on revoke, and comes first on grant, with the
 * host node's mode and owner, made beneath the handle's root fd on the container's own /dev only. A
 * container whose root is not its rootfs (handle.rootProblem) gets the rules, which are its cgroup's, and no
 * node is made or removed beneath that root. Every step is tried; the failures are thrown together.
 */
export async function applyAccess(handle: ContainerHandle, change: AccessChange, v2?: V2Program): Promise<void> {
  const {control, root} = handle
  const v1Dir = control.mode === 'v1' ? control.dir : control.v1Dir
  if (control.mode === 'v2' && v2 === undefined && v1Dir === undefined) throw new Error(`cgroup v2: no device program of ${control.dir} was read to replace`)
  const failures: string[] = []
  for (const access of change.revoke) {
    try {
      if (v1Dir !== undefined) await denyDevice(v1Dir, ruleOf(access))
      if (handle.rootProblem === undefined) removeDeviceNode(root, access.device.devNode, access.device.major, access.device.minor)
    } catch (error) {
      failures.push(`revoke ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  if (v2 !== undefined) {
    try {
      // Before the nodes are made: a grant is usable once both exist, a revoke took effect above.
      replaceDeviceProgram(control.dir, v2.replaces, v2.rules)
    } catch (error) {
      failures.push(`device program of ${control.dir}: ${(error as Error).message}`)
    }
  }
  for (const access of change.grant) {
    try {
      const host = hostNode(access.device.devNode)
      if (handle.rootProblem === undefined) {
        createDeviceNode(root, {
          gid: host?.gid ?? 0,
          major: access.device.major,
          minor: access.device.minor,
          mode: host === undefined ? 0o660 : host.mode & 0o777,
          path: access.device.devNode,
          type: access.device.type,
          uid: host?.uid ?? 0,
        })
      }
      if (v1Dir !== undefined) await allowDevice(v1Dir, ruleOf(access))
    } catch (error) {
      failures.push(`grant ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  // Written through what the handle pinned: they reached the container only if its process still runs.
  handle.assertRunning()
  if (failures.length > 0) throw new Error(failures.join('; '))
}

/** The host's node of a device (its mode and owner go to the container's); synchronous, as the cgroup files are (device-cgroup.ts). */
function hostNode(path: string): {mode: number; uid: number; gid: number} | undefined {
  try {
    return statSync(path, {throwIfNoEntry: false})
  } catch {
    return undefined
  }
}
