import {spawn, type ChildProcess} from 'node:child_process'
import {closeSync, openSync} from 'node:fs'
import {setTimeout as sleep} from 'node:timers/promises'

export interface DaemonOptions {
  /** stdout and stderr are appended here. */
  readonly logFile: string
  /** Leave it running when this process exits (npm run cluster:up / node:up). */
  readonly detached?: boolean
  readonly env?: NodeJS.ProcessEnv
}

/** The components this process started and has not seen exit: killed together when it exits. */
const running = new Set<ChildProcess>()
let killingOnExit = false

/** Starts a long-running test component (etcd, kube-apiserver, containerd, kubelet) with its log in a file. */
export function launchDaemon(binary: string, args: readonly string[], options: DaemonOptions): ChildProcess {
  const logFd = openSync(options.logFile, 'a')
  const child = spawn(binary, args, {
    detached: options.detached ?? false,
    env: options.env ?? process.env,
    stdio: ['ignore', logFd, logFd],
  })
  closeSync(logFd)
  if (options.detached) {
    child.unref()
  } else {
    // Never leave a component behind when the test process dies; one listener for all of them (a node's cluster
    // runs a dozen).
    running.add(child)
    child.once('exit', () => running.delete(child))
    if (!killingOnExit) {
      killingOnExit = true
      process.once('exit', () => {
        for (const component of running) component.kill('SIGKILL')
      })
    }
  }
  return child
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function terminate(pid: number | undefined, child?: ChildProcess, graceMs = 10_000): Promise<void> {
  if (pid === undefined) return
  const alive = (): boolean => {
    if (child) return child.exitCode === null && child.signalCode === null
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
  if (!alive()) return
  process.kill(pid, 'SIGTERM')
  for (let waited = 0; waited < graceMs && alive(); waited += 50) await sleep(50)
  if (alive()) {
    process.kill(pid, 'SIGKILL')
    for (let i = 0; i < 100 && alive(); i++) await sleep(20)
  }
}
