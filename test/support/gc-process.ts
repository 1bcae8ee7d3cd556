import {spawn, type ChildProcess} from 'node:child_process'
import {createServer} from 'node:net'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'

import {waitFor} from './wait.js'

const devBin = fileURLToPath(new URL('../../bin/dev.js', import.meta.url))

export interface LogLine {
  level: string
  msg: string
  time: number
  [key: string]: unknown
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as {port: number}
      server.close(() => resolve(port))
    })
  })
}

/**
 * `nfdctl gc run` as a child process, run from the TypeScript sources (bin/dev.js), the way an operator
 * runs it: JSON logs on stdout are collected for assertions; /metrics and /readyz on its own port.
 */
export class GcProcess {
  readonly logs: LogLine[] = []
  readonly stderr: string[] = []
  readonly startedAt = Date.now()
  readonly #child: ChildProcess
  readonly #exited: Promise<number | null>

  private constructor(readonly port: number, args: readonly string[]) {
    this.#child = spawn(process.execPath, [devBin, 'gc', 'run', '--log-format', 'json', '--metrics-port', String(port), ...args], {stdio: ['ignore', 'pipe', 'pipe']})
    createInterface({input: this.#child.stdout!}).on('line', (line) => {
      try {
        this.logs.push(JSON.parse(line) as LogLine)
      } catch {
        this.stderr.push(line)
      }
    })
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

  static async start(args: readonly string[]): Promise<GcProcess> {
    return new GcProcess(await freePort(), args)
  }

  get pid(): number {
    return this.#child.pid!
  }

  get exited(): boolean {
    return this.#child.exitCode !== null || this.#child.signalCode !== null
  }

  /** Waits for a log line matching `predicate`; the error lists what was logged. */
  async waitForLog(what: string, predicate: (line: LogLine) => boolean, timeoutMs = 15_000): Promise<LogLine> {
    try {
      return await waitFor(what, async () => this.logs.find(predicate), {intervalMs: 20, timeoutMs})
    } catch (error) {
      throw new Error(`${(error as Error).message}\nlogs:\n${this.transcript()}`)
    }
  }

  count(predicate: (line: LogLine) => boolean): number {
    return this.logs.filter(predicate).length
  }

  async get(path: string): Promise<{status: number; body: string}> {
    const res = await fetch(`http://127.0.0.1:${this.port}${path}`)
    return {body: await res.text(), status: res.status}
  }

  /** The value of one sample in /metrics, e.g. metric('nfd_gc_objects_deleted_total{kind="NodeFeature"}'). */
  async metric(sample: string): Promise<number | undefined> {
    const {body} = await this.get('/metrics')
    const line = body.split('\n').find((l) => l.startsWith(`${sample} `))
    return line === undefined ? undefined : Number(line.slice(sample.length + 1))
  }

  /** Sends a signal and waits for the exit code (null when killed by a signal). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<number | null> {
    if (!this.exited) this.#child.kill(signal)
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), timeoutMs)
    try {
      return await this.#exited
    } finally {
      clearTimeout(timer)
    }
  }

  transcript(): string {
    return [...this.logs.map((l) => JSON.stringify(l)), ...this.stderr].join('\n')
  }
}
