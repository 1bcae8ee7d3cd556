import {spawn, type ChildProcess} from 'node:child_process'
import {dirname} from 'node:path'
import {createInterface} from 'node:readline'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'

import {waitFor} from './wait.js'

const devBin = fileURLToPath(new URL('../../bin/dev.js', import.meta.url))

/** How a child ended: its exit code, or the signal that killed it. */
export interface ChildEnd {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/**
 * Any nfdctl command as a child process (from the TypeScript sources unless `bin` is given), its stdout
 * lines timestamped. Every wait on its output rejects as soon as the child has exited, with its stderr.
 */
export class CliProcess {
  readonly lines: Array<{text: string; at: number}> = []
  readonly stderr: string[] = []
  /** Settles once the child has exited and its output is read. */
  readonly ended: Promise<ChildEnd>
  readonly #child: ChildProcess
  readonly #exited: Promise<ChildEnd>

  /**
   * `as`: run as this uid/gid (root can drop to nobody to prove a command needs no privilege); that user
   * must be able to read `bin` and its package (see installed-cli.ts), which is then also the working directory.
   */
  constructor(
    readonly args: readonly string[],
    bin = devBin,
    as?: {uid: number; gid: number},
    launch: 'node' | 'shebang' = 'node',
  ) {
    const cwd = as ? dirname(dirname(bin)) : undefined
    const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe']
    // 'shebang' runs the file itself, as npm's bin link does, so the V8 flags on its #! line apply (benchmarks).
    this.#child = launch === 'shebang' ? spawn(bin, args, {cwd, stdio, ...as}) : spawn(process.execPath, [bin, ...args], {cwd, stdio, ...as})
    createInterface({input: this.#child.stdout!}).on('line', (text) => this.lines.push({at: performance.now(), text}))
    createInterface({input: this.#child.stderr!}).on('line', (line) => this.stderr.push(line))
    const killOnExit = (): void => void this.#child.kill('SIGKILL')
    process.once('exit', killOnExit)
    this.#exited = new Promise((resolve) =>
      this.#child.once('exit', (code, signal) => {
        process.off('exit', killOnExit)
        resolve({code, signal})
      }),
    )
    // 'close' follows once both pipes have ended, so every line is in; a grandchild holding them open must not stall it.
    const closed = new Promise<void>((resolve) => this.#child.once('close', () => resolve()))
    this.ended = this.#exited.then(async (end) => {
      await Promise.race([closed, sleep(200, undefined, {ref: false})])
      return end
    })
    this.#child.once('error', (error) => this.stderr.push(`spawn failed: ${error.message}`))
  }

  get pid(): number {
    return this.#child.pid!
  }

  /** Parsed JSON lines (non-JSON lines skipped). */
  json<T>(): T[] {
    return this.lines.flatMap((l) => {
      try {
        return [JSON.parse(l.text) as T]
      } catch {
        return []
      }
    })
  }

  /**
   * Re-checks `probe` against the output until it answers, the deadline passes, or the child exits (then at
   * once, after one last look). The error carries the child's stdout and stderr.
   */
  async waitFor<T>(what: string, probe: () => T | undefined, options: {timeoutMs?: number; intervalMs?: number} = {}): Promise<T> {
    const giveUpOn = this.ended.then(({code, signal}) => new Error(`nfdctl ${this.args.join(' ')} exited (${signal ?? `code ${code}`}) first`))
    try {
      return await waitFor(what, async () => probe(), {giveUpOn, intervalMs: options.intervalMs ?? 5, timeoutMs: options.timeoutMs ?? 10_000})
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${this.transcript()}`, {cause: error})
    }
  }

  async waitForLine<T>(what: string, predicate: (value: T) => boolean, timeoutMs = 10_000): Promise<{value: T; at: number}> {
    return this.waitFor(
      what,
      () => {
        for (const line of this.lines) {
          try {
            const value = JSON.parse(line.text) as T
            if (predicate(value)) return {at: line.at, value}
          } catch {
            // a table line
          }
        }
        return undefined
      },
      {timeoutMs},
    )
  }

  /**
   * Sends a signal and waits for the exit code (null when killed by a signal) and for the last of its
   * output, which can still be in the pipe when the process has exited; SIGKILL after the timeout.
   */
  async stop(signal: NodeJS.Signals = 'SIGINT', timeoutMs = 15_000): Promise<number | null> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill(signal)
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), timeoutMs)
    try {
      return (await this.ended).code
    } finally {
      clearTimeout(timer)
    }
  }

  transcript(): string {
    return `stdout:\n${this.lines.map((l) => l.text).join('\n')}\nstderr:\n${this.stderr.join('\n')}`
  }
}
