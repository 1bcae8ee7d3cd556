import {expect} from 'chai'

import {ExitCode} from '../../../src/lib/errors.js'
import {countFailed, countStale, exitCodeFor, type KindSummary, type SweepReport} from '../../../src/lib/gc/sweep-report.js'

function kind(name: string, counts: Partial<Omit<KindSummary, 'kind'>> = {}): KindSummary {
  return {changed: 0, deleted: 0, failed: 0, kind: name, scanned: 0, stale: 0, ...counts}
}

function report(overrides: Partial<SweepReport> = {}): SweepReport {
  return {apiRequests: 3, apiThrottled: 0, concurrency: {final: 8, highest: 8, lowest: 8}, durationMs: 12, dryRun: false, kinds: [], nodes: 2, objects: [], ...overrides}
}

describe('sweep report', () => {
  describe('countStale / countFailed', () => {
    it('are 0 for no kinds', () => {
      expect(countStale(report())).to.equal(0)
      expect(countFailed(report())).to.equal(0)
    })

    it('sum over every kind', () => {
      const r = report({kinds: [kind('NodeFeature', {failed: 1, scanned: 10, stale: 4}), kind('NodeResourceTopology', {failed: 2, scanned: 7, stale: 3})]})
      expect(countStale(r)).to.equal(7)
      expect(countFailed(r)).to.equal(3)
    })

    it('read the per-kind summaries, not the objects list', () => {
      const r = report({kinds: [kind('NodeFeature', {stale: 2})], objects: []})
      expect(countStale(r)).to.equal(2)
    })
  })

  describe('exitCodeFor', () => {
    const staleKinds = [kind('NodeFeature', {deleted: 2, scanned: 5, stale: 2})]
    const cases: Array<{title: string; report: SweepReport; failOnStale: boolean; code: number}> = [
      {code: ExitCode.ok, failOnStale: false, report: report(), title: 'ok: nothing stale'},
      {code: ExitCode.ok, failOnStale: false, report: report({kinds: staleKinds}), title: 'ok: stale objects all deleted'},
      {
        code: ExitCode.failed,
        failOnStale: false,
        report: report({kinds: [kind('NodeFeature', {deleted: 1, failed: 1, stale: 2})]}),
        title: 'failed: a deletion failed',
      },
      {
        code: ExitCode.failed,
        failOnStale: false,
        report: report({kinds: [kind('NodeFeature', {stale: 1}), kind('NodeResourceTopology', {failed: 1, stale: 1})]}),
        title: 'failed: a deletion of the second kind failed',
      },
      {code: ExitCode.failed, failOnStale: false, report: report({kinds: staleKinds, refused: 'too many'}), title: 'failed: refused'},
      {code: ExitCode.failed, failOnStale: false, report: report({refused: ''}), title: 'failed: refused with an empty reason still counts as refused'},
      {
        code: ExitCode.failed,
        failOnStale: true,
        report: report({dryRun: true, kinds: staleKinds, refused: 'no nodes'}),
        title: 'failed: refusal wins over --fail-on-stale',
      },
      {code: ExitCode.staleFound, failOnStale: true, report: report({dryRun: true, kinds: staleKinds}), title: 'staleFound: dry run, failOnStale, stale objects'},
      {code: ExitCode.ok, failOnStale: true, report: report({dryRun: true, kinds: [kind('NodeFeature', {scanned: 5})]}), title: 'ok: dry run, failOnStale, nothing stale'},
      {code: ExitCode.ok, failOnStale: false, report: report({dryRun: true, kinds: staleKinds}), title: 'ok: dry run with stale objects but no failOnStale'},
      {code: ExitCode.ok, failOnStale: true, report: report({dryRun: false, kinds: staleKinds}), title: 'ok: failOnStale without dry run'},
    ]
    for (const c of cases) {
      it(c.title, () => {
        expect(exitCodeFor(c.report, {failOnStale: c.failOnStale})).to.equal(c.code)
      })
    }

    it('uses the documented numeric codes', () => {
      expect(ExitCode).to.deep.equal({failed: 1, ok: 0, staleFound: 3, usage: 2})
    })
  })
})
