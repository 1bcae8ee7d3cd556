import * as Flags from '@oclif/core/flags'

import {defaultMetricsPort} from '../lib/observe/observe-options.js'

/** Logging and metrics flags of every long-running command (gc run, plugins serve, devices agent). */
export const observeFlags = {
  'log-format': Flags.string({description: 'json or text (default: json unless stdout is a terminal)', helpGroup: 'OBSERVABILITY'}),
  'log-level': Flags.string({default: 'info', description: 'debug, info, warn or error', helpGroup: 'OBSERVABILITY'}),
  'metrics-bind-address': Flags.string({
    description: `host:port of /metrics, /healthz and /readyz (127.0.0.1:8080, [::1]:8080, :8080 for every address, 0 disables; default :${defaultMetricsPort})`,
    helpGroup: 'OBSERVABILITY',
  }),
  // No oclif default: given together with --metrics-bind-address it is refused, so it must be seen as given or not.
  'metrics-port': Flags.integer({description: 'short for --metrics-bind-address :<port> (0 disables)', helpGroup: 'OBSERVABILITY'}),
}
