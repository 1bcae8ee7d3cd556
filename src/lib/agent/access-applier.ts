import {stat} from 'node:fs/promises'

import {allowDevice, denyDevice, readDeviceRules, type DeviceControl} from '../runtime/device-cgroup.js'
import {createDeviceNode, removeDeviceNode} from '../sys/path-inside.js'
import {ruleOf, type AccessChange, type DeviceAccess} from './container-access.js'

/**
 * The class devices a container has now: the specific rules of its v1 devices cgroup that name a device
 * nfdctl knows (present or seen before), with their access. Wildcard and unknown rules are not ours.
 */
export async function currentAccess(control: DeviceControl, known: ReadonlyMap<string, DeviceAccess['device']>): Promise<Map<string, DeviceAccess>> {
  const current = new Map<string, DeviceAccess>()
  for (const rule of await readDeviceRules(control.dir)) {
    if (rule.type === 'a' || rule.major === '*' || rule.minor === '*') continue
    const device = known.get(`${rule.type}${rule.major}:${rule.minor}`)
    if (device !== undefined) current.set(device.id, {access: rule.access, device})
  }
  return current
}

/**
 * Applies a change to one running container on cgroup v1: revokes first (deny the rule, remove the node
 * it was given), then grants (the device node inside the container's root, with the host node's mode and
 * owner, then the rule). Every step is tried; the failures are thrown together.
 */
export async function applyAccess(pid: number, control: DeviceControl, change: AccessChange): Promise<void> {
  if (control.mode !== 'v1') throw new Error(`cgroup ${control.mode} device control is not supported yet (${control.dir})`)
  const root = `/proc/${pid}/root`
  const failures: string[] = []
  for (const access of change.revoke) {
    try {
      await denyDevice(control.dir, ruleOf(access))
      removeDeviceNode(root, access.device.devNode, access.device.major, access.device.minor)
    } catch (error) {
      failures.push(`revoke ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  for (const access of change.grant) {
    try {
      const host = await stat(access.device.devNode).catch(() => undefined)
      createDeviceNode(root, {
        gid: host?.gid ?? 0, major: access.device.major, minor: access.device.minor, mode: host === undefined ? 0o660 : host.mode & 0o777,
        path: access.device.devNode, type: access.device.type, uid: host?.uid ?? 0,
      })
      await allowDevice(control.dir, ruleOf(access))
    } catch (error) {
      failures.push(`grant ${access.device.devNode}: ${(error as Error).message}`)
    }
  }
  if (failures.length > 0) throw new Error(failures.join('; '))
}
