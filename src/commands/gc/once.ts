import * as Flags from '@oclif/core/flags'

import {kubeFlags} from '../../cli/kube-flags.js'
import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {Progress} from '../../cli/progress.js'
import {renderSweep, type OutputFormat} from '../../cli/render-sweep.js'
import {sweepFlags} from '../../cli/sweep-flags.js'
import {sweepProgress} from '../../cli/sweep-progress.js'
import {openCluster} from '../../lib/kube/connect.js'
import {sweepOnce} from '../../lib/gc/sweep.js'
import {sweepOptionsFrom} from '../../lib/gc/sweep-options.js'
import {exitCodeFor, type SweepReport} from '../../lib/gc/sweep-report.js'

export default class GcOnce extends NfdctlCommand {
  static override description = `One garbage-collection sweep: delete every NodeFeature and NodeResourceTopology whose Node is gone, then exit.

Every list is a snapshot, and the Node snapshot is taken after the objects' ones (so a node that joins during the read is seen); nothing is deleted when the node list cannot be read or is empty, or when more than --max-delete-ratio of the objects look stale. Every delete carries the UID that was seen, so an object re-created meanwhile is kept.

Exit codes: 0 done, 1 some deletions failed or the sweep was refused for safety, 2 bad flags or configuration, 3 stale objects found (--dry-run --fail-on-stale).`
  static override enableJsonFlag = true
  static override examples = [
    '<%= config.bin %> <%= command.id %> --dry-run',
    '<%= config.bin %> <%= command.id %> --context prod --kinds NodeFeature -o yaml',
    '<%= config.bin %> <%= command.id %> --dry-run --fail-on-stale --json',
  ]
  static override flags = {
    ...kubeFlags,
    ...sweepFlags,
    output: Flags.option({char: 'o', default: 'table', description: 'output format', options: ['table', 'json', 'yaml'] as const})(),
  }

  async run(): Promise<SweepReport> {
    const {flags} = await this.parse(GcOnce)
    const options = sweepOptionsFrom(flags)
    const signal = options.timeoutMs > 0 ? AbortSignal.any([this.signal, AbortSignal.timeout(options.timeoutMs)]) : this.signal
    // A one-shot cleanup's deletes are a burst of known size: slow start from 8 takes about 150 ms to reach
    // 64 in flight, a tenth of a 1,000-object cleanup's deletes; from half the ceiling it is one round trip, and a
    // server without room for it answers 429 at once (the window halves).
    const {client} = await openCluster(
      {context: flags.context, kubeconfig: flags.kubeconfig},
      {burst: options.burst, initialConcurrency: Math.ceil(options.concurrency / 2), maxConnections: options.concurrency, qps: options.qps},
    )
    const progress = await Progress.open(this.jsonEnabled() ? 'silent' : this.interactive ? 'spinner' : 'lines')
    try {
      const report = await sweepOnce(client, options, {onEvent: sweepProgress(progress)}, signal)
      progress.stop()
      if (report.refused) this.warn(report.refused)
      // Under --json oclif prints the returned report; a table rendered only to be dropped was the whole
      // report again in memory at the end of a mass cleanup.
      if (!this.jsonEnabled()) this.log(renderSweep(report, flags.output as OutputFormat))
      process.exitCode = exitCodeFor(report, options)
      return report
    } finally {
      progress.stop()
      client.close()
    }
  }
}
