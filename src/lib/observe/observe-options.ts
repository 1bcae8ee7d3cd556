import {UsageError} from '../errors.js'
import {logLevels, type LogFormat, type LogLevel} from './logger.js'

export interface RawObserveFlags {
  readonly 'metrics-port': number
  readonly 'log-format'?: string
  readonly 'log-level': string
}

export interface ObserveOptions {
  /** 0: no metrics/health server. */
  readonly metricsPort: number
  readonly logFormat: LogFormat
  readonly logLevel: LogLevel
}

/** Checks the logging and metrics flags every long-running command shares; one UsageError per mistake. */
export function observeOptionsFrom(flags: RawObserveFlags, stdoutIsTty: boolean): ObserveOptions {
  const port = flags['metrics-port']
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError(`--metrics-port must be a port from 1 to 65535, or 0 to disable, got ${port}`)
  const format = flags['log-format'] ?? (stdoutIsTty ? 'text' : 'json')
  if (format !== 'json' && format !== 'text') throw new UsageError(`--log-format must be json or text, got "${format}"`)
  const level = flags['log-level']
  if (!(logLevels as readonly string[]).includes(level)) throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got "${level}"`)
  return {logFormat: format, logLevel: level as LogLevel, metricsPort: port}
}
