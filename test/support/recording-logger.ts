import type {Logger} from '../../src/lib/observe/logger.js'

export interface LoggedLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error'
  readonly msg: string
  readonly fields: Record<string, unknown>
}

/** A Logger that keeps its lines (children share them, with their bindings in the fields), for asserting what was said. */
export function recordingLogger(bindings: Record<string, unknown> = {}, lines: LoggedLine[] = []): Logger & {readonly lines: LoggedLine[]} {
  const at =
    (level: LoggedLine['level']) =>
    (fields: object, msg: string): void =>
      void lines.push({fields: {...bindings, ...fields}, level, msg})
  return {
    child: (more: object) => recordingLogger({...bindings, ...more}, lines),
    debug: at('debug'),
    error: at('error'),
    info: at('info'),
    lines,
    warn: at('warn'),
  }
}
