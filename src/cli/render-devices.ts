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
  readonly classes: string[]
}

export interface WatchedDevice extends ListedDevice {
  readonly event: string
}

export function listedDevice(device: Device, classes: string[]): ListedDevice {
  return {
    classes,
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

const cells = (d: ListedDevice): string[] => [d.devNode, d.type, `${d.major}:${d.minor}`, d.subsystem, d.classes.join(',') || '<none>']
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
