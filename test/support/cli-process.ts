import {spawn, type ChildProcess} from 'node:child_process'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'

import {waitFor} from './wait.js'

const devBin = fileURLToPath(new URL('../../bin/dev.js', import.meta.url))

/** Any nfdctl command as a child process (from the TypeScript sources), its stdout lines timestamped. */
export class CliProcess {
  readonly lines: Array<{text: string; at: number}> = []
  readonly stderr: string[] = []
  readonly #child: ChildProcess
  readonly #exited: Promise<number | null>

  /** `as`: run as this uid/gid (root can drop to nobody to prove a command needs no privilege). */
  constructor(args: readonly string[], bin = devBin, as?: {uid: number; gid: number}) {
    this.#child = spawn(process.execPath, [bin, ...args], {stdio: ['ignore', 'pipe', 'pipe'], ...as})
    createInterface({input: this.#child.stdout!}).on('line', (text) => this.lines.push({at: performance.now(), text}))
    createInterface({input: this.#child.stderr!}).on('line', (line) => this.stderr.push(line))
    const killOnExit = (): void => void this.#child.kill('SIGKILL')
    process.once('exit', killOnExit)
    this.#exited = new Promise((resolve) =>
      this.#child.once('exit', (code) => {
        process.off('exit', killOnExit)
        resolve(code)
      }),
    )
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

  async waitForLine<T>(what: string, predicate: (value: T) => boolean, timeoutMs = 10_000): Promise<{value: T; at: number}> {
    try {
      return await waitFor(what, async () => {
        for (const line of this.lines) {
          try {
            const value = JSON.parse(line.text) as T
            if (predicate(value)) return {at: line.at, value}
          } catch {
            // a table line
          }
        }
        return undefined
      }, {intervalMs: 5, timeoutMs})
    } catch (error) {
      throw new Error(`${(error as Error).message}\nstdout:\n${this.lines.map((l) => l.text).join('\n')}\nstderr:\n${this.stderr.join('\n')}`)
    }
  }

  /** Sends a signal and waits for the exit code (null when killed by a signal); SIGKILL after the timeout. */
  async stop(signal: NodeJS.Signals = 'SIGINT', timeoutMs = 15_000): Promise<number | null> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill(signal)
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), timeoutMs)
    try {
      return await this.#exited
    } finally {
      clearTimeout(timer)
    }
  }
}
