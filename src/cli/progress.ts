import type {Ora, Options} from 'ora'

type Spinners = (options: Options) => Ora

/**
 * Progress for long work: an ora spinner redrawn in place on a TTY, plain lines otherwise (cron jobs and
 * CI logs get one line per finished step, not a line per update). Always on stderr.
 */
export class Progress {
  #spinner?: Ora

  private constructor(
    private readonly mode: 'lines' | 'silent' | 'spinner',
    private readonly writeLine: (line: string) => void,
    /** Loaded in spinner mode only; no other mode draws one. */
    private readonly ora?: Spinners,
  ) {}

  /** ora and its two dozen modules (about 9 MB) are loaded only when a spinner is drawn. */
  static async open(mode: 'lines' | 'silent' | 'spinner', writeLine: (line: string) => void = (line) => process.stderr.write(line + '\n')): Promise<Progress> {
    return new Progress(mode, writeLine, mode === 'spinner' ? (await import('ora')).default : undefined)
  }

  /** Whether transient status is shown (a spinner on a TTY). */
  get live(): boolean {
    return this.mode === 'spinner'
  }

  /** Transient status: spinner text on a TTY, nothing in line mode. */
  update(text: string): void {
    if (this.mode !== 'spinner') return
    if (this.#spinner) this.#spinner.text = text
    else this.#spinner = this.#newSpinner(text).start()
  }

  /** Intermediate progress worth a line in a log (every tenth of a long job, say); spinner text on a TTY. */
  tick(text: string): void {
    if (this.mode === 'lines') this.writeLine(text)
    else this.update(text)
  }

  /** A finished step: a ✔ line on a TTY, a plain line otherwise. */
  step(text: string): void {
    if (this.mode === 'silent') return
    if (this.mode === 'spinner') {
      ;(this.#spinner ?? this.#newSpinner()).succeed(text)
      this.#spinner = undefined
    } else {
      this.writeLine(text)
    }
  }

  /** A warning that must be seen in every mode but silent. */
  warn(text: string): void {
    if (this.mode === 'silent') return
    if (this.mode === 'spinner') {
      ;(this.#spinner ?? this.#newSpinner()).warn(text)
      this.#spinner = undefined
    } else {
      this.writeLine(`warning: ${text}`)
    }
  }

  #newSpinner(text?: string): Ora {
    return this.ora!({stream: process.stderr, text})
  }

  stop(): void {
    this.#spinner?.stop()
    this.#spinner = undefined
  }
}
