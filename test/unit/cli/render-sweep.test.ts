import {expect} from 'chai'

import {renderSweep} from '../../../src/cli/render-sweep.js'
import type {SweepReport} from '../../../src/lib/gc/sweep-report.js'

const report: SweepReport = {
  apiRequests: 9,
  apiThrottled: 0,
  concurrency: {final: 20, highest: 20, lowest: 8},
  dryRun: false,
  durationMs: 40,
  kinds: [
    {changed: 2, deleted: 1, failed: 0, kind: 'NodeFeature', scanned: 6, stale: 3},
    {changed: 0, deleted: 1, failed: 0, kind: 'NodeResourceTopology', scanned: 3, stale: 1},
  ],
  nodes: 3,
  objects: [
    {action: 'delete', kind: 'NodeFeature', name: 'moved', namespace: 'nfd', node: 'gone', reason: 'node-gone', result: 'changed', uid: 'u1'},
    {action: 'delete', kind: 'NodeFeature', name: 'again', namespace: 'nfd', node: 'gone', reason: 'node-gone', result: 'replaced', uid: 'u2'},
    {action: 'delete', kind: 'NodeFeature', name: 'old', namespace: 'nfd', node: 'gone', reason: 'node-gone', result: 'deleted', uid: 'u3'},
    {action: 'delete', kind: 'NodeResourceTopology', name: 'gone', node: 'gone', reason: 'node-gone', result: 'deleted', uid: 'u4'},
  ],
}

describe('renderSweep', () => {
  it('shows objects kept because they changed: a CHANGED column, their result, and the verdict line', () => {
    const text = renderSweep(report, 'table')
    expect(text).to.match(/^KIND +SCANNED +STALE +DELETED +CHANGED +FAILED +NOTE$/m)
    expect(text).to.match(/^NodeFeature +6 +3 +1 +2 +0 *$/m)
    expect(text).to.match(/^NodeFeature +nfd +moved +gone +node does not exist +changed$/m)
    expect(text).to.match(/^NodeFeature +nfd +again +gone +node does not exist +replaced$/m)
    expect(text.split('\n').at(-1)).to.equal('Deleted 2 of 4 stale objects, 2 kept (changed since judged stale, or their Node registered again) (3 nodes, 40ms, 9 API requests)')
  })

  it('says nothing of kept objects when there are none', () => {
    const plain: SweepReport = {...report, kinds: report.kinds.map((k) => ({...k, changed: 0})), objects: []}
    expect(renderSweep(plain, 'table').split('\n').at(-1)).to.match(/^Deleted 2 of 4 stale objects \(/)
  })

  it('says how often the server throttled the sweep and how far the concurrency window moved', () => {
    const throttled: SweepReport = {...report, apiThrottled: 12, concurrency: {final: 3, highest: 24, lowest: 2}}
    expect(renderSweep(throttled, 'table').split('\n').at(-1)).to.match(/9 API requests, 12 throttled by the server \(429\), concurrency 2-24\)$/)
  })

  it('carries the changed count and each object result in JSON', () => {
    const parsed = JSON.parse(renderSweep(report, 'json')) as SweepReport
    expect(parsed.kinds.map((k) => k.changed)).to.deep.equal([2, 0])
    expect(parsed.objects.map((o) => o.result)).to.deep.equal(['changed', 'replaced', 'deleted', 'deleted'])
  })
})
