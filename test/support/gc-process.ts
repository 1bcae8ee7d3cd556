import {CliProcess, type ChildEnd} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'

export interface LogLine {
  level: string
  msg: string
  time: number
  [key: string]: unknown
}

/**
 * `nfdctl gc run` as a child process, run from the TypeScript sources (bin/dev.js), the way an operator
 * runs it: JSON logs on stdout are collected for assertions; /metrics and /readyz on its own port. A wait
 * for a log line ends as soon as the process exits, with its stderr.
 */
export class GcProcess {
  readonly startedAt = Date.now()
  readonly #cli: CliProcess

  private constructor(
    readonly port: number,
    args: readonly string[],
  ) {
    this.#cli = new CliProcess(['gc', 'run', '--log-format', 'json', '--metrics-port', String(port), ...args])
  }

  static async start(args: readonly string[]): Promise<GcProcess> {
    return new GcProcess(await freePort(), args)
  }

  /** The JSON log lines so far. */
  get logs(): LogLine[] {
    return this.#cli.json<LogLine>()
  }

  /** Waits for a log line matching `predicate`; rejects at once if the process exits first. The error lists what was logged. */
  async waitForLog(what: string, predicate: (line: LogLine) => boolean, timeoutMs = 15_000): Promise<LogLine> {
    return this.#cli.waitFor(what, () => this.logs.find(predicate), {intervalMs: 20, timeoutMs})
  }

  /** Settles when the process has exited. */
  get ended(): Promise<ChildEnd> {
    return this.#cli.ended
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
    return this.#cli.stop(signal, timeoutMs)
  }

  transcript(): string {
    return this.#cli.transcript()
  }
}
