import type {Device} from '../../src/lib/devices/types.js'

/** The Device a loop block device is (major 7), as the scanner reports it; no file is touched. */
export function loopDevice(minor: number, properties: Record<string, string> = {}): Device {
  return {
    devName: `loop${minor}`,
    devNode: `/dev/loop${minor}`,
    devPath: `/devices/virtual/block/loop${minor}`,
    id: `b7:${minor}`,
    kernelName: `loop${minor}`,
    major: 7,
    minor,
    properties,
    subsystem: 'block',
    type: 'block',
  }
}
