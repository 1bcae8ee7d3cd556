import {closeSync, openSync} from 'node:fs'

import {errno, errnoText, sys} from '../../src/lib/sys/libc.js'

const LOOP_CTL_ADD = 0x4c_80
const LOOP_CTL_REMOVE = 0x4c_81

function loopControl<T>(fn: (fd: number) => T): T {
  const fd = openSync('/dev/loop-control', 'r+')
  try {
    return fn(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * Creates /dev/loop<index> through /dev/loop-control (the kernel sends real `add` uevents for it). Needs
 * root. Use high, test-specific indexes: the kernel may be shared with other jobs.
 */
export function addLoopDevice(index: number): void {
  loopControl((fd) => {
    if ((sys.ioctl(fd, LOOP_CTL_ADD, index) as number) < 0) throw new Error(`LOOP_CTL_ADD ${index} failed: ${errnoText(errno())}`)
  })
}

/** Removes /dev/loop<index> (real `remove` uevents). Ignores a device that is already gone. */
export function removeLoopDevice(index: number): void {
  loopControl((fd) => {
    if ((sys.ioctl(fd, LOOP_CTL_REMOVE, index) as number) < 0) {
      const code = errno()
      if (code !== 19) throw new Error(`LOOP_CTL_REMOVE ${index} failed: ${errnoText(code)}`) // ENODEV: gone
    }
  })
}

export function canUseLoopControl(): boolean {
  try {
    closeSync(openSync('/dev/loop-control', 'r+'))
    return true
  } catch {
    return false
  }
}

/**
 * The same ioctls on koffi's worker thread, so this process's event loop stays free while the kernel works
 * (removing a disk blocks the caller for tens of milliseconds): a benchmark can then timestamp the uevent
 * the moment it arrives. Resolves with the ioctl's return value (negative on failure).
 */
export async function loopControlAsync(action: 'add' | 'remove', index: number): Promise<number> {
  const fd = openSync('/dev/loop-control', 'r+')
  try {
    return await new Promise<number>((resolve, reject) => {
      sys.ioctl.async(fd, action === 'add' ? LOOP_CTL_ADD : LOOP_CTL_REMOVE, index, (error: unknown, value: number) => (error ? reject(error as Error) : resolve(value)))
    })
  } finally {
    closeSync(fd)
  }
}
