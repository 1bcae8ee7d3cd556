import {readFileSync} from 'node:fs'

import {errno, errnoText, sys} from './libc.js'

// A process pinned by a pidfd (pidfd_open(2), Linux 5.3): the fd names that one process, never a later
// one that the kernel gave the same PID. Where the kernel has no pidfd_open, the PID and its start time
// (/proc/<pid>/stat) stand in: a reused PID has a later start time.

/** pidfd_open is 434 on every architecture (the shared syscall table from Linux 5.1 on). */
const sysPidfdOpen = 434
const ESRCH = 3
const ENOSYS = 38
const POLLIN = 0x1

/** The process asked for does not exist (any more). */
export class ProcessGoneError extends Error {
  constructor(readonly pid: number) {
    super(`process ${pid} does not exist (any more)`)
  }
}

/** A process's state letter and start time in clock ticks since boot (/proc/<pid>/stat), undefined when it is gone. */
export function processStat(pid: number, procRoot = '/proc'): {state: string; startTime: bigint} | undefined {
  let stat: string
  try {
    stat = readFileSync(`${procRoot}/${pid}/stat`, 'utf8')
  } catch {
    return undefined
  }
  // The command name (field 2) is in parentheses and may hold spaces or ')': count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const [state] = fields
  const start = fields[19] // field 22, the 20th after the name
  if (start === undefined || !/^\d+$/.test(start)) throw new Error(`unexpected ${procRoot}/${pid}/stat: "${stat.trim()}"`)
  return {startTime: BigInt(start), state}
}

/**
 * One process, pinned from now on: `isRunning()` answers for this process, whatever later process is given
 * its PID. A zombie (exited, not yet reaped) counts as not running.
 */
export class PinnedProcess {
  readonly #pidfd: number | undefined
  readonly #startTime: bigint | undefined
  #closed = false

  private constructor(
    readonly pid: number,
    pidfd: number | undefined,
    startTime: bigint | undefined,
  ) {
    this.#pidfd = pidfd
    this.#startTime = startTime
  }

  /** Pins the process `pid` is now; ProcessGoneError when there is none. */
  static open(pid: number, options: {pidfd?: boolean} = {}): PinnedProcess {
    if (options.pidfd ?? true) {
      const fd = Number(sys.syscall(sysPidfdOpen, 'int', pid, 'unsigned int', 0))
      if (fd >= 0) return new PinnedProcess(pid, fd, undefined)
      const code = errno()
      if (code === ESRCH) throw new ProcessGoneError(pid)
      if (code !== ENOSYS) throw new Error(`pidfd_open(${pid}) failed: ${errnoText(code)}`)
    }
    const stat = processStat(pid)
    if (stat === undefined || stat.state === 'Z') throw new ProcessGoneError(pid)
    return new PinnedProcess(pid, undefined, stat.startTime)
  }

  /** Whether a pidfd pins it (false: the kernel has none, the start time does). */
  get hasPidfd(): boolean {
    return this.#pidfd !== undefined
  }

  /** Whether the pinned process still runs: its pidfd is not readable yet (it becomes so at exit). */
  isRunning(): boolean {
    if (this.#closed) throw new Error(`process ${this.pid}: pin already closed`)
    if (this.#pidfd === undefined) {
      const stat = processStat(this.pid)
      return stat !== undefined && stat.startTime === this.#startTime && stat.state !== 'Z'
    }
    const poll = Buffer.alloc(8) // struct pollfd {int fd; short events; short revents}
    poll.writeInt32LE(this.#pidfd, 0)
    poll.writeInt16LE(POLLIN, 4)
    const ready = sys.poll(poll, 1, 0) as number
    if (ready < 0) throw new Error(`poll on the pidfd of process ${this.pid} failed: ${errnoText(errno())}`)
    return ready === 0
  }

  /**
   * Resolves once the process has exited or `timeoutMs` has passed, whichever is first (the pidfd becomes
   * readable at exit; without one, the time passes). Nothing here can be woken early: keep the bound short.
   */
  async exitedWithin(timeoutMs: number): Promise<void> {
    if (this.#closed) throw new Error(`process ${this.pid}: pin already closed`)
    if (this.#pidfd === undefined) {
      await new Promise((resolve) => setTimeout(resolve, timeoutMs))
      return
    }
    const poll = Buffer.alloc(8)
    poll.writeInt32LE(this.#pidfd, 0)
    poll.writeInt16LE(POLLIN, 4)
    // On koffi's worker thread; errno is not read after it: an interrupted poll is just an early return.
    await new Promise<void>((resolve, reject) => {
      sys.poll.async(poll, 1, timeoutMs, (error: unknown) => (error ? reject(error as Error) : resolve()))
    })
  }

  /** Idempotent. */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    if (this.#pidfd !== undefined) sys.close(this.#pidfd)
  }
}
