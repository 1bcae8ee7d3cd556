import {type ChildProcess, execFile} from 'node:child_process'
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {launchDaemon, terminate} from '../process/daemon.js'
import {waitFor} from '../process/wait.js'

/** What a binary is started with inside a mount namespace: the command and its arguments. */
export interface Launch {
  readonly command: string
  readonly args: readonly string[]
}

/**
 * A private mount namespace held open by a sleeping process, with bind mounts over host paths that only the
 * processes entered into it see. A second node's kubelet and containerd run in one: kubelet's device-plugin
 * directory is a constant path, and the mounts kubelet makes for pods (projected tokens, the root dir's
 * rshared bind) must be the ones its containerd and runc see. Slave propagation: host mounts still reach it,
 * none of its own reach the host, and they all go with the last process in it.
 */
export class MountNamespace {
  #keeper: ChildProcess | undefined

  private constructor(readonly dir: string) {}

  /** Mounts each `source` over its `target` (which must exist on the host) inside a new namespace. */
  static async create(dir: string, binds: ReadonlyArray<readonly [source: string, target: string]>): Promise<MountNamespace> {
    const namespace = new MountNamespace(dir)
    const script = [...binds.map((_, i) => `mount --bind "$${2 * i + 1}" "$${2 * i + 2}"`), 'echo mounted', 'exec sleep infinity'].join(' && ')
    const logFile = join(dir, 'mount-namespace.log')
    const keeper = launchDaemon('unshare', ['--mount', '--propagation', 'slave', '--', 'sh', '-c', script, 'sh', ...binds.flat()], {logFile})
    namespace.#keeper = keeper
    const exited = new Promise<Error>((resolve) => keeper.once('exit', (code) => resolve(new Error(`the mount namespace's keeper exited (${code}); see ${logFile}`))))
    await waitFor('the mount namespace', async () => (await readFile(logFile, 'utf8')).includes('mounted'), {giveUpOn: exited, intervalMs: 20, timeoutMs: 10_000})
    return namespace
  }

  /** `nsenter` into the namespace, which then execs the binary: the process keeps the pid it was started with. */
  launch(binary: string, args: readonly string[]): Launch {
    const pid = this.#keeper?.pid
    if (pid === undefined) throw new Error('the mount namespace is closed')
    return {args: ['-t', String(pid), '-m', '--', binary, ...args], command: 'nsenter'}
  }

  /**
   * Mounts `source` over `target` (which must exist on the host) in the running namespace: its processes see
   * it at once, the host never does. It goes with the namespace.
   */
  async bind(source: string, target: string): Promise<void> {
    const pid = this.#keeper?.pid
    if (pid === undefined) throw new Error('the mount namespace is closed')
    await promisify(execFile)('nsenter', ['-t', String(pid), '-m', '--', 'mount', '--bind', source, target])
  }

  /** Ends the keeper; the namespace and its mounts go once the processes entered into it have exited too. */
  async close(): Promise<void> {
    await terminate(this.#keeper?.pid, this.#keeper)
    this.#keeper = undefined
  }
}
