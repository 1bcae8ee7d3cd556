import type {Device} from '../lib/devices/types.js'
import {yaml} from '../lib/yaml.js'
import {formatTable} from './table.js'

export interface ListedDevice {
  readonly devNode: string
  readonly devName: string
  readonly type: Device['type']
  readonly major: number
  readonly minor: number
  readonly subsystem: string
  readonly devType?: string
  readonly devPath: string
  /** The classes that serve the device. */
  readonly classes: string[]
  /** The classes that match it and do not serve it (host-critical), each with why. */
  readonly refused?: Record<string, string>
}

export interface WatchedDevice extends ListedDevice {
  readonly event: string
}

export function listedDevice(device: Device, matched: string[], refused: ReadonlyMap<string, string> = new Map()): ListedDevice {
  return {
    classes: matched.filter((name) => !refused.has(name)),
    ...(refused.size > 0 ? {refused: Object.fromEntries(refused)} : {}),
    devName: device.devName,
    devNode: device.devNode,
    devPath: device.devPath,
    devType: device.devType,
    major: device.major,
    minor: device.minor,
    subsystem: device.subsystem,
    type: device.type,
  }
}

// A class that matches and does not serve the device shows as !<class>; the reason goes to stderr (refusalLines).
const cells = (d: ListedDevice): string[] => [d.devNode, d.type, `${d.major}:${d.minor}`, d.subsystem, [...d.classes, ...Object.keys(d.refused ?? {}).map((name) => `!${name}`)].join(',') || '<none>']

/** One line per class that does not serve a listed device, saying why and what to change. */
export function refusalLines(devices: readonly ListedDevice[]): string[] {
  return devices.flatMap((d) => Object.entries(d.refused ?? {}).map(([name, why]) => `${d.devNode} is not served by DeviceClass ${name}: ${why}`))
}

const headers = ['DEVICE', 'TYPE', 'MAJ:MIN', 'SUBSYSTEM', 'CLASSES']

export function renderDevices(devices: readonly ListedDevice[], format: 'json' | 'table' | 'yaml'): string {
  if (format === 'json') return JSON.stringify(devices, null, 2)
  if (format === 'yaml') return yaml().stringify(devices).trimEnd()
  return devices.length === 0 ? 'No devices.' : formatTable(headers, devices.map(cells))
}

/** One line per event: a JSON object for json/yaml output, else an aligned row with the event first. */
export function renderWatchEvent(event: WatchedDevice, format: 'json' | 'table' | 'yaml'): string {
  if (format !== 'table') return JSON.stringify(event)
  const row = [event.event.toUpperCase().padEnd(7), ...cells(event)]
  return [row[0], row[1].padEnd(22), row[2].padEnd(5), row[3].padEnd(9), row[4].padEnd(10), row[5]].join(' ')
}
