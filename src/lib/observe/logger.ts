import {pino, type DestinationStream, type Level} from 'pino'

/** The logging surface the library needs; pino's Logger satisfies it. */
export interface Logger {
  debug(fields: object, message: string): void
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
  child(bindings: object): Logger
}

export const noopLogger: Logger = {
  child: () => noopLogger,
  debug: () => {},
  error: () => {},
  info: () => {},
  warn: () => {},
}

export type LogFormat = 'json' | 'text'
export const logLevels = ['debug', 'info', 'warn', 'error'] as const
export type LogLevel = (typeof logLevels)[number]

/** One line per event: `2026-12-02T13:00:00.000Z INFO  sweep done kind=NodeFeature deleted=3`. */
export function formatTextLine(record: Record<string, unknown>): string {
  const {level, msg, time, ...fields} = record
  delete fields.pid
  delete fields.hostname
  const label = String(level).toUpperCase().padEnd(5)
  const pairs = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`)
  return [new Date(Number(time)).toISOString(), label, msg, ...pairs].join(' ')
}

function textDestination(out: NodeJS.WritableStream): DestinationStream {
  return {
    write(line: string) {
      out.write(formatTextLine(JSON.parse(line) as Record<string, unknown>) + '\n')
    },
  }
}

/** The process logger of a long-running command: JSON lines (for collectors) or text (for people). */
export function createLogger(options: {format: LogFormat; level: LogLevel; out?: NodeJS.WritableStream; base?: object}): Logger {
  const out = options.out ?? process.stdout
  const destination = options.format === 'json' ? pino.destination({dest: 1, sync: true}) : textDestination(out)
  return pino(
    {base: options.base ?? {}, formatters: {level: (label) => ({level: label})}, level: options.level as Level},
    options.format === 'json' && out !== process.stdout ? (out as unknown as DestinationStream) : destination,
  )
}
