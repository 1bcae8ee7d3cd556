import {closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync} from 'node:fs'

import {errno, errnoText, sys} from './libc.js'

const LOCK_EX = 2
const LOCK_NB = 4
const EWOULDBLOCK = 11
const EINTR = 4

/**
 * An exclusive flock(2) on a file, with the holder's PID written in it. The kernel drops the lock when the
 * holder's descriptor closes, also when the process is killed (SIGKILL, OOM), so a stale file never keeps
 * anyone out; the file itself stays (removing it would let two processes lock two different files).
 */
export class FileLock {
  #fd: number | undefined

  private constructor(
    readonly path: string,
    fd: number,
  ) {
    this.#fd = fd
  }

  /** Takes the lock, or answers the PID written by its holder (undefined when none is written yet). Throws on any other failure. */
  static tryAcquire(path: string): FileLock | {holderPid: number | undefined} {
    // libuv adds O_CLOEXEC: a child process never inherits the lock.
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600)
    for (;;) {
      if ((sys.flock(fd, LOCK_EX | LOCK_NB) as number) === 0) break
      const code = errno()
      if (code === EINTR) continue
      closeSync(fd)
      if (code === EWOULDBLOCK) return {holderPid: FileLock.holderOf(path)}
      throw new Error(`cannot lock ${path}: flock failed: ${errnoText(code)}`)
    }
    ftruncateSync(fd, 0)
    writeSync(fd, `${process.pid}\n`, 0)
    return new FileLock(path, fd)
  }

  /** The PID its holder wrote; undefined when the file is empty or holds no number. */
  static holderOf(path: string): number | undefined {
    try {
      const text = readFileSync(path, 'utf8').trim()
      return /^\d+$/.test(text) ? Number(text) : undefined
    } catch {
      return undefined
    }
  }

  /** Drops the lock (the file stays). Idempotent. */
  release(): void {
    if (this.#fd === undefined) return
    closeSync(this.#fd)
    this.#fd = undefined
  }
}
