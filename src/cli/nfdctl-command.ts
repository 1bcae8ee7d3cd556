import {Command} from '@oclif/core/command'
import * as Errors from '@oclif/core/errors'

import {ExitCode, NfdctlError} from '../lib/errors.js'
import {holdMemoryDown} from '../lib/memory.js'

/**
 * The one base command: V8's memory settings, a root AbortSignal tied to SIGINT/SIGTERM, and the error →
 * exit-code mapping that keeps exit codes identical with and without --json.
 */
export abstract class NfdctlCommand extends Command {
  readonly #controller = new AbortController()
  #onSignal?: (signal: NodeJS.Signals) => void

  /** Aborted on SIGINT/SIGTERM. */
  protected get signal(): AbortSignal {
    return this.#controller.signal
  }

  /** True when progress can be drawn in place (a spinner); else plain lines. */
  protected get interactive(): boolean {
    // A pseudo-terminal with no size (script(1), some CI runners) sends ora into a redraw loop.
    return Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) > 0 && !this.jsonEnabled()
  }

  /** A warning on stderr that --json does not silence (oclif's warn() does): stdout stays pure JSON. */
  protected warnAlways(message: string): void {
    process.stderr.write(`Warning: ${message}\n`)
  }

  /** oclif's warning, kept on one line when stderr is not a terminal (see {@link unwrappedStderr}). */
  override warn(input: string | Error): string | Error {
    if (this.jsonEnabled() || !unwrappedStderr()) return super.warn(input)
    process.stderr.write(`Warning: ${oneLine(typeof input === 'string' ? new Error(input) : input)}\n`)
    return input
  }

  /**
   * --json for programs: plain JSON unless stdout is a terminal (oclif colours it for people). oclif
   * tokenises the whole document for colours even when it then prints none: for a 4,000-object sweep
   * report that was 0.1 s and ~10 MB of peak RSS (bench:gc). The text is the same either way.
   */
  override logJson(json: unknown): void {
    if (process.stdout.isTTY) {
      super.logJson(json)
      return
    }
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`)
  }

  override async init(): Promise<void> {
    await super.init()
    holdMemoryDown()
    this.#onSignal = (signal) => this.#controller.abort(new Error(`received ${signal}`))
    process.once('SIGINT', this.#onSignal)
    process.once('SIGTERM', this.#onSignal)
  }

  override async finally(error: Error | undefined): Promise<unknown> {
    if (this.#onSignal) {
      process.off('SIGINT', this.#onSignal)
      process.off('SIGTERM', this.#onSignal)
    }
    return super.finally(error)
  }

  override async catch(error: Error & {exitCode?: number; oclif?: {exit?: number}; showHelp?: boolean}): Promise<unknown> {
    const exit = error.oclif?.exit ?? error.exitCode ?? ExitCode.failed
    // Bad input gets one line, not the usage dump oclif appends to parse errors.
    error.showHelp = false
    if (this.jsonEnabled()) {
      // --json reads exitCode; oclif's own parse errors only carry oclif.exit.
      error.exitCode = exit
      if (!(error instanceof NfdctlError)) return super.catch(new NfdctlError(oneLine(error), exit))
      error.message = oneLine(error) // oclif prefixes "Parsing --flag" to errors thrown by flag parsers
      return super.catch(error)
    }
    const line = oneLine(error)
    if (!unwrappedStderr()) throw new Errors.CLIError(line, {exit})
    process.stderr.write(`Error: ${line}\n`)
    const printed = new Errors.CLIError(line, {exit})
    printed.skipOclifErrorHandling = true
    throw printed
  }
}

/**
 * oclif hard-wraps errors and warnings at the terminal's width, and at 80 columns when stderr is a pipe or a
 * file: journald and `kubectl logs` would then hold half a message per line. Off a terminal nfdctl prints
 * them itself, one line each.
 */
function unwrappedStderr(): boolean {
  return !process.stderr.isTTY
}

/** The error's message as one line: oclif's "Parsing --x" preamble and "See more help" trailer dropped. */
function oneLine(error: Error): string {
  const lines = (error.message || String(error))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('See more help'))
  const flag = /^Parsing (--\S+)/.exec(lines[0] ?? '')?.[1]
  if (flag && lines.length > 1) {
    lines.shift()
    if (!lines[0].startsWith(flag)) lines[0] = `${flag}: ${lines[0]}`
  }
  const text = lines.join(' ')
  return /Nonexistent flag|Unexpected argument|Missing required flag/.test(text) ? `${text} (see --help)` : text
}
