import {isIP} from 'node:net'

import {UsageError} from '../errors.js'
import {logLevels, type LogFormat, type LogLevel} from './logger.js'

export interface RawObserveFlags {
  readonly 'metrics-bind-address'?: string
  readonly 'metrics-port'?: number
  readonly 'log-format'?: string
  readonly 'log-level': string
}

export interface ObserveOptions {
  /** 0: no metrics/health server. */
  readonly metricsPort: number
  /** The address to listen on; absent: every address (in a pod, its pod IP and loopback). */
  readonly metricsHost?: string
  readonly logFormat: LogFormat
  readonly logLevel: LogLevel
}

/** Where /metrics, /healthz and /readyz listen when neither flag is given. */
export const defaultMetricsPort = 8080

/** Checks the logging and metrics flags every long-running command shares; one UsageError per mistake. */
export function observeOptionsFrom(flags: RawObserveFlags, stdoutIsTty: boolean): ObserveOptions {
  const listen = metricsListenFrom(flags)
  const format = flags['log-format'] ?? (stdoutIsTty ? 'text' : 'json')
  if (format !== 'json' && format !== 'text') throw new UsageError(`--log-format must be json or text, got "${format}"`)
  const level = flags['log-level']
  if (!(logLevels as readonly string[]).includes(level)) throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got "${level}"`)
  return {...listen, logFormat: format, logLevel: level as LogLevel}
}

/**
 * --metrics-bind-address is controller-runtime's flag: host:port, `:port` for every address, `0` to disable.
 * --metrics-port N is short for `:N`; both at once would leave one of them silently ignored, so it is refused.
 */
function metricsListenFrom(flags: RawObserveFlags): {metricsPort: number; metricsHost?: string} {
  const address = flags['metrics-bind-address']
  const port = flags['metrics-port']
  if (address !== undefined && port !== undefined) {
    throw new UsageError(`--metrics-bind-address and --metrics-port cannot be given together; use --metrics-bind-address alone (--metrics-port ${port} is short for --metrics-bind-address :${port})`)
  }
  if (address === undefined) {
    const chosen = port ?? defaultMetricsPort
    if (!isPort(chosen, true)) throw new UsageError(`--metrics-port must be a port from 1 to 65535, or 0 to disable, got ${chosen}`)
    return {metricsPort: chosen}
  }
  return parseBindAddress(address)
}

const usage = 'host:port (127.0.0.1:8080, [::1]:8080, :8080 for every address) or 0 to disable'

/** `host:port`, `[ipv6]:port`, `:port`, or `0`; the host an IP address or a DNS name such as localhost. */
function parseBindAddress(address: string): {metricsPort: number; metricsHost?: string} {
  if (address === '0') return {metricsPort: 0}
  const bad = (why: string): UsageError => new UsageError(`--metrics-bind-address must be ${usage}; "${address}" ${why}`)
  const match = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(address)
  if (!match) {
    if (isIP(address) === 6) throw bad('needs brackets around the IPv6 address and a port')
    throw bad(address.includes(':') ? 'is not host:port' : 'has no port')
  }
  const [, v6, name, portText] = match
  const port = Number(portText)
  if (!isPort(port, false)) throw bad(`has port ${portText}, not one from 1 to 65535`)
  if (v6 !== undefined) {
    if (isIP(v6) !== 6) throw bad(`has "${v6}" in brackets, which is not an IPv6 address`)
    return {metricsHost: v6, metricsPort: port}
  }
  if (name === '') return {metricsPort: port}
  if (isIP(name!) === 0 && !isDnsName(name!)) throw bad(`has host "${name}", which is neither an IP address nor a DNS name`)
  return {metricsHost: name, metricsPort: port}
}

function isPort(port: number, zeroDisables: boolean): boolean {
  return Number.isInteger(port) && port >= (zeroDisables ? 0 : 1) && port <= 65_535
}

function isDnsName(name: string): boolean {
  // All digits and dots is a mistyped IPv4 address (1.2.3.999), not a name to resolve.
  if (/^[\d.]+$/.test(name)) return false
  return name.length <= 253 && name.split('.').every((label) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/i.test(label))
}
