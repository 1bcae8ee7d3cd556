import type {DoctorReport} from '../lib/doctor/findings.js'
import {yaml} from '../lib/yaml.js'
import type {OutputFormat} from './render-sweep.js'
import {formatTable} from './table.js'

export function renderDoctor(report: DoctorReport, format: OutputFormat): string {
  if (format === 'json') return JSON.stringify(report, null, 2)
  if (format === 'yaml') return yaml().stringify(report).trimEnd()
  const table = formatTable(
    ['FEATURE', 'STATUS', 'CHECK', 'FOUND'],
    report.findings.map((f) => [f.feature, f.status.toUpperCase(), f.check, f.found]),
  )
  const problems = report.findings.filter((f) => f.status !== 'ok' && f.fix)
  const fixes = problems.map((f) => `${f.status.toUpperCase()} ${f.feature}: ${f.fix}`)
  const failed = report.findings.filter((f) => f.status === 'fail').length
  const warned = report.findings.filter((f) => f.status === 'warn').length
  const verdict = `${report.server}: ${failed} failed, ${warned} warnings, ${report.findings.length - failed - warned} ok`
  return [table, ...(fixes.length > 0 ? [fixes.join('\n')] : []), verdict].join('\n\n')
}
