import * as Flags from '@oclif/core/flags'

import {observeFlags} from './observe-flags.js'

/** Flags of the long-running collector (`gc run`) beyond what it collects. */
export const runFlags = {
  // Below `gc once`'s 64: a daemon's cleanups are a node pool at a time, and each request in flight is a TLS
  // connection and its objects, 5 MB of peak RSS between 16 and 64 at 2,000 Nodes (docs/benchmarks.md).
  concurrency: Flags.integer({default: 16, description: "most requests in flight; below it, the server's 429s and latency decide"}),
  'grace-period': Flags.string({default: '30s', description: 'delete an object only after it was seen stale twice this far apart (0 = at once)'}),
  interval: Flags.string({default: '1h', description: 'time between full sweeps (node deletions are handled at once)'}),
  'leader-elect': Flags.boolean({description: 'run as one of several replicas; only the holder of a Lease deletes', helpGroup: 'LEADER ELECTION'}),
  'leader-elect-lease-duration': Flags.string({default: '15s', description: 'how long a standby waits after the last renewal before taking over', helpGroup: 'LEADER ELECTION'}),
  'leader-elect-lease-name': Flags.string({default: 'nfdctl-gc', description: 'name of the coordination.k8s.io Lease', helpGroup: 'LEADER ELECTION'}),
  'leader-elect-namespace': Flags.string({
    description: 'namespace of the Lease (default: $POD_NAMESPACE, the service account namespace, the kubeconfig context namespace, or default)',
    helpGroup: 'LEADER ELECTION',
  }),
  'leader-elect-renew-deadline': Flags.string({default: '10s', description: 'the leader steps down when it could not renew for this long', helpGroup: 'LEADER ELECTION'}),
  'leader-elect-retry-period': Flags.string({default: '2s', description: 'time between attempts to acquire or renew', helpGroup: 'LEADER ELECTION'}),
  ...observeFlags,
}
