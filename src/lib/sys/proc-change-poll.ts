import {closeSync, constants, openSync} from 'node:fs'

import {errno, errnoText, sys} from './libc.js'

const POLLPRI = 0x2
const POLLERR = 0x8
const POLLNVAL = 0x20
const pollfdBytes = 8 // struct pollfd {int fd; short events; short revents}

/**
 * Files of /proc that poll(2) marks when what they show changes: /proc/<pid>/mountinfo (and mounts) on every
 * mount and unmount in that process's mount namespace, /proc/swaps on every swapon and swapoff. The kernel
 * clears the mark as poll reports it, so `changed()` answers "since the last call", with no read.
 *
 * `changed()` never waits (timeout 0): the caller asks from a timer. A waiting poll would run on koffi's worker
 * thread, one of libuv's four, for the life of the process (the uevent socket holds one already), and need an
 * eventfd to stop; this one costs 1.4 µs per call for three files.
 */
export class ProcChangePoll {
  readonly #fds: Buffer
  readonly #paths: string[] = []
  /** The files that could not be opened, and why: they are not followed. */
  readonly unopened: ReadonlyArray<{readonly path: string; readonly error: unknown}>
  #closed = false

  constructor(paths: readonly string[]) {
    const opened: number[] = []
    const unopened: Array<{path: string; error: unknown}> = []
    for (const path of paths) {
      try {
        opened.push(openSync(path, constants.O_RDONLY)) // libuv adds O_CLOEXEC
        this.#paths.push(path)
      } catch (error) {
        unopened.push({error, path})
      }
    }
    this.unopened = unopened
    this.#fds = Buffer.alloc(pollfdBytes * opened.length)
    opened.forEach((fd, i) => {
      this.#fds.writeInt32LE(fd, i * pollfdBytes)
      this.#fds.writeInt16LE(POLLPRI, i * pollfdBytes + 4)
    })
  }

  /** The files that changed since the last call (or since they were opened). */
  changed(): string[] {
    if (this.#closed) throw new Error('proc change poll: already closed')
    const ready = sys.poll(this.#fds, this.#paths.length, 0) as number
    if (ready < 0) throw new Error(`poll on ${this.#paths.join(', ')} failed: ${errnoText(errno())}`)
    if (ready === 0) return [] // also when nothing could be opened
    return this.#paths.filter((path, i) => {
      const revents = this.#fds.readInt16LE(i * pollfdBytes + 6)
      if (revents & POLLNVAL) throw new Error(`poll reports ${path} closed underneath (POLLNVAL)`)
      return (revents & (POLLPRI | POLLERR)) !== 0
    })
  }

  /** Idempotent. */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    for (let i = 0; i < this.#paths.length; i++) closeSync(this.#fds.readInt32LE(i * pollfdBytes))
  }
}
