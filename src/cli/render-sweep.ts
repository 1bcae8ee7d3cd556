import {formatDurationMs} from '../lib/duration.js'
import {countFailed, countStale, type SweepReport} from '../lib/gc/sweep-report.js'
import {staleReasonText} from '../lib/gc/sweep-planner.js'
import {yaml} from '../lib/yaml.js'
import {formatTable} from './table.js'

export type OutputFormat = 'json' | 'table' | 'yaml'

export function renderSweep(report: SweepReport, format: OutputFormat): string {
  if (format === 'json') return JSON.stringify(report, null, 2)
  if (format === 'yaml') return yaml().stringify(report).trimEnd()
  return renderSweepTable(report)
}

/** The per-kind summary, then each stale object with what was done to it, then one verdict line. */
function renderSweepTable(report: SweepReport): string {
  const summary = formatTable(
    ['KIND', 'SCANNED', 'STALE', report.dryRun ? 'WOULD DELETE' : 'DELETED', 'CHANGED', 'FAILED', 'NOTE'],
    report.kinds.map((k) => [
      k.kind,
      String(k.scanned),
      String(k.stale),
      String(report.dryRun ? k.stale : k.deleted),
      String(k.changed),
      String(k.failed),
      k.skipped ? 'CRD not installed: skipped' : '',
    ]),
  )
  const parts = [summary]
  if (report.objects.length > 0) {
    parts.push(
      formatTable(
        ['KIND', 'NAMESPACE', 'NAME', 'NODE', 'REASON', 'RESULT'],
        report.objects.map((o) => [o.kind, o.namespace ?? '', o.name, o.node ?? '<none>', staleReasonText[o.reason], o.error ? `${o.result}: ${o.error}` : o.result]),
      ),
    )
  }
  parts.push(verdict(report))
  return parts.join('\n\n')
}

function verdict(report: SweepReport): string {
  const stale = countStale(report)
  const throttled = report.apiThrottled ? `, ${report.apiThrottled} throttled by the server (429), concurrency ${report.concurrency.lowest}-${report.concurrency.highest}` : ''
  const took = `${report.nodes} nodes, ${formatDurationMs(report.durationMs)}, ${report.apiRequests} API requests${throttled}`
  if (report.refused) return `Refused: ${report.refused} (${took})`
  if (report.dryRun) return `Dry run: ${stale} stale objects would be deleted (${took})`
  const deleted = report.kinds.reduce((n, k) => n + k.deleted, 0)
  const changed = report.kinds.reduce((n, k) => n + k.changed, 0)
  const failed = countFailed(report)
  const kept = changed ? `, ${changed} kept (changed since judged stale, or their Node registered again)` : ''
  return `Deleted ${deleted} of ${stale} stale objects${kept}${failed ? `, ${failed} failed` : ''} (${took})`
}
