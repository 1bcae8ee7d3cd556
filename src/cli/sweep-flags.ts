import * as Flags from '@oclif/core/flags'

import {gcKindNames} from '../lib/gc/kinds.js'
import {numberFlag} from './kube-flags.js'

/** What to collect and how hard: shared by `gc once` and `gc run`. */
export const collectFlags = {
  'allow-empty-nodes': Flags.boolean({description: 'delete even when the cluster lists no Nodes at all'}),
  concurrency: Flags.integer({default: 64, description: "most requests in flight; below it, the server's 429s and latency decide"}),
  force: Flags.boolean({description: 'delete even above --max-delete-ratio'}),
  'keep-unlabelled': Flags.boolean({description: 'keep NodeFeatures that have no nfd.node.kubernetes.io/node-name label'}),
  kinds: Flags.string({description: `comma-separated kinds to collect (default: all): ${gcKindNames.join(', ')}`}),
  'list-size': Flags.integer({default: 500, description: 'objects per list page; 0 lists all in one request'}),
  'max-delete-ratio': Flags.custom<number>({
    default: 0.5,
    description: 'refuse to delete more than this share (0..1) of the scanned objects',
    parse: numberFlag('max-delete-ratio'),
  })(),
}

/** Flags of a one-shot sweep (`gc once`). */
export const sweepFlags = {
  ...collectFlags,
  'dry-run': Flags.boolean({description: 'report stale objects, delete nothing'}),
  'fail-on-stale': Flags.boolean({description: 'with --dry-run: exit 3 when stale objects are found'}),
  timeout: Flags.string({default: '5m', description: 'give up after this long (e.g. 30s, 5m; 0 = no limit)'}),
}
