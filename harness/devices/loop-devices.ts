import {execFile, spawnSync} from 'node:child_process'
import {closeSync, existsSync, openSync} from 'node:fs'
import {truncate, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {errno, errnoText, sys} from '../../src/lib/sys/libc.js'
import type {TestNode} from '../node/node.js'

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

const EEXIST = 17
const ENODEV = 19

/**
 * Creates /dev/loop<index> through /dev/loop-control (the kernel sends real `add` uevents for it). Needs
 * root. Use only the caller's own indexes (loop-owners.ts): the kernel is shared, so a device already at
 * one of them is what an earlier run of the same owner left, and is removed (its backing file detached
 * first) and added again rather than failing this run.
 */
export function addLoopDevice(index: number): void {
  loopControl((fd) => {
    if ((sys.ioctl(fd, LOOP_CTL_ADD, index) as number) >= 0) return
    const code = errno()
    if (code !== EEXIST) throw new Error(`LOOP_CTL_ADD ${index} failed: ${errnoText(code)}`)
    removeLeftover(fd, index)
    if ((sys.ioctl(fd, LOOP_CTL_ADD, index) as number) < 0) throw new Error(`LOOP_CTL_ADD ${index} failed after removing the leftover: ${errnoText(errno())}`)
  })
}

function removeLeftover(fd: number, index: number): void {
  spawnSync('losetup', ['-d', `/dev/loop${index}`]) // fails harmlessly when nothing is bound
  if ((sys.ioctl(fd, LOOP_CTL_REMOVE, index) as number) < 0) {
    const code = errno()
    if (code !== ENODEV) throw new Error(`loop${index} was left by an earlier run and cannot be removed (${errnoText(code)}): unmount it or close what holds it open`)
  }
}

/** Removes /dev/loop<index> (real `remove` uevents). Ignores a device that is already gone. */
export function removeLoopDevice(index: number): void {
  loopControl((fd) => {
    if ((sys.ioctl(fd, LOOP_CTL_REMOVE, index) as number) < 0) {
      const code = errno()
      if (code !== ENODEV) throw new Error(`LOOP_CTL_REMOVE ${index} failed: ${errnoText(code)}`)
    }
  })
}

/** Detaches and removes each of these loop devices that is present (what a run left behind); returns those it removed. */
export function removeLeftoverLoops(indexes: readonly number[]): number[] {
  const present = indexes.filter((index) => existsSync(`/sys/block/loop${index}`))
  loopControl((fd) => {
    for (const index of present) removeLeftover(fd, index)
  })
  return present
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

/** Why a loop device cannot be given a file system and mounted here (a tool missing), or undefined. */
export function missingMountTool(): string | undefined {
  const missing = ['losetup', 'mkfs.ext4', 'mount', 'umount'].find((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
  return missing === undefined ? undefined : `${missing} is not installed (util-linux, e2fsprogs)`
}

/** What the first 13 bytes of a BackedLoops device say: `loop-<index>-data`. */
export const loopData = (index: number): string => `loop-${index}-data`

/**
 * Loop devices a test plugs in, each bound (losetup) to a backing file in `dir` that starts with
 * loopData(index), so that a read inside a container proves access; remembered until dropped.
 */
export class BackedLoops {
  readonly #plugged = new Set<number>()

  constructor(readonly dir: string) {}

  /** The indexes plugged in and not yet dropped. */
  get plugged(): number[] {
    return [...this.#plugged]
  }

  async add(index: number): Promise<void> {
    addLoopDevice(index)
    this.#plugged.add(index)
    const backing = join(this.dir, `backing-${index}`)
    await writeFile(backing, loopData(index).padEnd(4096, '.'))
    await promisify(execFile)('losetup', [`/dev/loop${index}`, backing])
  }

  /** Plugged in as add() does, then grown to 8 MiB and given an ext4 file system (its first bytes are then no longer loopData). */
  async addWithFileSystem(index: number): Promise<void> {
    await this.add(index)
    await truncate(join(this.dir, `backing-${index}`), 8 * 2 ** 20)
    await promisify(execFile)('losetup', ['-c', `/dev/loop${index}`])
    await promisify(execFile)('mkfs.ext4', ['-q', '-F', `/dev/loop${index}`])
  }

  async drop(index: number): Promise<void> {
    await promisify(execFile)('losetup', ['-d', `/dev/loop${index}`]).catch(() => {})
    removeLoopDevice(index)
    this.#plugged.delete(index)
  }
}

/** What a running container reads from the start of /dev/loop<index>, or why it could not. */
export async function readLoop(node: TestNode, containerId: string, index: number): Promise<string> {
  try {
    return await node.exec(containerId, ['dd', `if=/dev/loop${index}`, 'bs=13', 'count=1', 'status=none'])
  } catch (error) {
    return `failed: ${(error as Error & {stderr?: string}).stderr ?? (error as Error).message}`
  }
}

/** A container's read of a BackedLoops device, on the node that runs it. */
export interface LoopReader {
  readonly node: TestNode
  /** The pod's name, for the failure it is named in. */
  readonly name: string
  readonly containerId: string
  readonly index: number
}

/**
 * Reads every reader's device over and over (a pause of `pauseMs` after each round) until stopped; resolves
 * with how many reads were made and what each failed one returned (nothing, when access held throughout).
 */
export function keepReading(readers: readonly LoopReader[], pauseMs = 100): {stop: () => Promise<{reads: number; failures: string[]}>} {
  let running = true
  const failures: string[] = []
  let reads = 0
  const rounds = (async () => {
    while (running) {
      for (const reader of readers) {
        const text = await readLoop(reader.node, reader.containerId, reader.index)
        reads++
        if (text !== loopData(reader.index)) failures.push(`${reader.name} loop${reader.index}: ${text}`)
      }
      await new Promise((resolve) => setTimeout(resolve, pauseMs))
    }
  })()
  return {
    stop: async () => {
      running = false
      await rounds
      return {failures, reads}
    },
  }
}
