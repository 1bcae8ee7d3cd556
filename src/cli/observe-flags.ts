import * as Flags from '@oclif/core/flags'

/** Logging and metrics flags of every long-running command (gc run, plugins serve, devices agent). */
export const observeFlags = {
  'log-format': Flags.string({description: 'json or text (default: json unless stdout is a terminal)', helpGroup: 'OBSERVABILITY'}),
  'log-level': Flags.string({default: 'info', description: 'debug, info, warn or error', helpGroup: 'OBSERVABILITY'}),
  'metrics-port': Flags.integer({default: 8080, description: 'port of /metrics, /healthz and /readyz (0 disables)', helpGroup: 'OBSERVABILITY'}),
}
