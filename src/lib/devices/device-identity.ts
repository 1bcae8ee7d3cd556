import {createHash} from 'node:crypto'

import type {Device} from './types.js'

/**
 * What a class follows a device by (DeviceClass spec.identity). Serial: the device's own serial number when
 * it has one, so that it is the same device on any port; without one, its port. Port: the port, whatever is
 * plugged into it. SerialAndPort: the serial number at its port, so that a device which says another's
 * serial (a board reflashed through its own tty can say anything) is another device unless it sits in the
 * other's port; without a serial number, its port.
 */
export const identitySources = ['Serial', 'Port', 'SerialAndPort'] as const
export type IdentitySource = (typeof identitySources)[number]

/**
 * Where an identity came from: a serial number, a serial number at a place (its port, or its sysfs path
 * where udev names no port), a port (udev's ID_PATH), the sysfs path.
 */
export type IdentityKind = 'serial' | 'serial and port' | 'port' | 'sysfs'

export interface DeviceIdentity {
  readonly kind: IdentityKind
  /** Everything that tells this device apart from others; two present devices with one key are one device to a class. */
  readonly key: string
  /** A readable word for IDs: the serial, the port, or the sysfs name. */
  readonly word: string
}

/**
 * Pure: a device's identity. udev sets ID_SERIAL to `<vendor>_<model>` when a device has no serial number,
 * so only ID_SERIAL_SHORT says that it has one: two identical serial-less adapters are then told apart by
 * their ports. One physical device makes several nodes (a disk and its partitions, a multi-port adapter's
 * interfaces, an input device's event and mouse nodes): the node's kind within it is part of the key, never
 * a kernel number that changes on re-plug.
 */
export function deviceIdentity(device: Device, follows: IdentitySource = 'Serial'): DeviceIdentity {
  const p = device.properties
  const within = [device.type, device.subsystem, device.devType ?? '', kindOfNode(device.kernelName), p.ID_USB_INTERFACE_NUM ?? '', p.PARTN ?? ''].join(':')
  const serial = p.ID_SERIAL_SHORT
  const port = p.ID_PATH !== undefined && p.ID_PATH !== '' ? p.ID_PATH : undefined
  if (follows !== 'Port' && serial !== undefined && serial !== '') {
    const says = `${p.ID_VENDOR_ID ?? ''}:${p.ID_MODEL_ID ?? ''}:${p.ID_SERIAL ?? ''}:${serial}:${within}`
    if (follows === 'Serial') return {key: `serial:${says}`, kind: 'serial', word: p.ID_SERIAL ?? serial}
    // Where udev names no port (no udev rules for the bus, a virtual device), the place is the sysfs path.
    const where = port === undefined ? `sysfs:${device.devPath}` : `port:${port}`
    return {key: `serial-at:${where}:${says}`, kind: 'serial and port', word: p.ID_SERIAL ?? serial}
  }
  if (port !== undefined) return {key: `port:${port}:${within}`, kind: 'port', word: port}
  const name = device.devPath.split('/').at(-1) || device.kernelName
  return {key: `sysfs:${device.devPath}:${device.type}`, kind: 'sysfs', word: name}
}

/**
 * The ID kubelet, CDI and DRA know the device by: the identity's word plus a hash of its key, within
 * kubelet's 63 characters. CDI device names, which these IDs also are, begin with a letter or digit.
 */
export function stableDeviceId(device: Device, follows?: IdentitySource): string {
  const {key, word} = deviceIdentity(device, follows)
  const readable =
    word
      .replaceAll(/[^A-Za-z0-9_.-]/g, '_')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 40) || 'device'
  return `${readable}-${createHash('sha256').update(key).digest('hex').slice(0, 12)}`
}

// ttyUSB3 → ttyUSB, event12 → event, nvme0n1p2 → nvme: the kind of node, without the numbers the kernel hands out.
const kindOfNode = (kernelName: string): string => /^[^0-9]*/.exec(kernelName)?.[0] ?? ''
