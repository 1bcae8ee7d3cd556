import {mkdir} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {AbortedError, ExitCode, NfdctlError} from '../errors.js'
import {FileLock} from '../sys/file-lock.js'
import {PinnedProcess, ProcessGoneError} from '../sys/pidfd.js'

/** The lock file below --state-dir. */
export const lockFileName = 'agent.lock'

/** Waiting for a holder is woken by its exit (its pidfd); this bounds each wait for a holder not visible here. */
const defaultRecheckMs = 1000

/** Another agent holds the state directory: one agent per node. */
export class StateDirLockedError extends NfdctlError {
  constructor(
    readonly stateDir: string,
    readonly holderPid: number | undefined,
  ) {
    super(
      `another devices agent (PID ${holderPid ?? 'unknown'}) holds ${join(stateDir, lockFileName)}: one agent per node; stop it, or start this one with --wait-for-lock to take over when it exits`,
      ExitCode.failed,
    )
  }
}

export interface StateDirLockOptions {
  /** Wait for the holder to go instead of failing. */
  readonly wait: boolean
  /** Told while waiting, once per holder. */
  readonly onWaiting?: (holderPid: number | undefined) => void
  /** The longest wait before the lock is tried again (a holder whose PID is unknown has no exit to wake on); default 1 s. */
  readonly recheckMs?: number
}

/**
 * Takes the exclusive lock on the agent's state directory (the directory is made if missing): the sockets,
 * the grant record and the prepared claims are one agent's. Fails with StateDirLockedError naming the
 * holder's PID, or with `wait` returns once the holder has exited (the kernel drops its lock whatever
 * way it ends). Hold the returned lock for the process's life.
 */
export async function lockStateDir(stateDir: string, signal: AbortSignal, options: StateDirLockOptions): Promise<FileLock> {
  await mkdir(stateDir, {mode: 0o700, recursive: true})
  const path = join(stateDir, lockFileName)
  let told: number | undefined | null = null
  for (;;) {
    const attempt = FileLock.tryAcquire(path)
    if (attempt instanceof FileLock) return attempt
    const {holderPid} = attempt
    if (!options.wait) throw new StateDirLockedError(stateDir, holderPid)
    if (told !== holderPid) options.onWaiting?.(holderPid)
    told = holderPid
    if (signal.aborted) throw new AbortedError(`stopped while waiting for the lock on ${path}`)
    await holderExited(holderPid, options.recheckMs ?? defaultRecheckMs, signal)
  }
}

async function holderExited(pid: number | undefined, recheckMs: number, signal: AbortSignal): Promise<void> {
  let holder: PinnedProcess | undefined
  try {
    holder = pid === undefined ? undefined : PinnedProcess.open(pid)
  } catch (error) {
    if (error instanceof ProcessGoneError) return // gone already: try again at once
    throw error
  }
  try {
    if (holder === undefined) await sleep(recheckMs, undefined, {signal}).catch(() => {})
    else await holder.exitedWithin(recheckMs)
  } finally {
    holder?.close()
  }
}
