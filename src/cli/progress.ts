import ora, {type Ora} from 'ora'

/**
 * Progress for long work: an ora spinner redrawn in place on a TTY, plain lines otherwise (cron jobs and
 * CI logs get one line per finished step, not a line per update). Always on stderr.
 */
export class Progress {
  #spinner?: Ora

  constructor(
    private readonly mode: 'lines' | 'silent' | 'spinner',
    private readonly writeLine: (line: string) => void = (line) => process.stderr.write(line + '\n'),
  ) {}

  /** Transient status: spinner text on a TTY, nothing in line mode. */
  update(text: string): void {
    if (this.mode !== 'spinner') return
    if (this.#spinner) this.#spinner.text = text
    else this.#spinner = ora({stream: process.stderr, text}).start()
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
      ;(this.#spinner ?? ora({stream: process.stderr})).succeed(text)
      this.#spinner = undefined
    } else {
      this.writeLine(text)
    }
  }

  /** A warning that must be seen in every mode but silent. */
  warn(text: string): void {
    if (this.mode === 'silent') return
    if (this.mode === 'spinner') {
      ;(this.#spinner ?? ora({stream: process.stderr})).warn(text)
      this.#spinner = undefined
    } else {
      this.writeLine(`warning: ${text}`)
    }
  }

  stop(): void {
    this.#spinner?.stop()
    this.#spinner = undefined
  }
}
