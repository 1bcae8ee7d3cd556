import {expect} from 'chai'

import {Progress} from '../../../src/cli/progress.js'
import {sweepProgress} from '../../../src/cli/sweep-progress.js'

// What a cron log gets from a mass cleanup: a line per finished step and one per tenth, not one per object.
describe('sweepProgress', function () {
  const run = async (mode: 'lines' | 'silent', total: number, failedAt = -1): Promise<string[]> => {
    const lines: string[] = []
    const onEvent = sweepProgress(await Progress.open(mode, (line) => lines.push(line)))
    onEvent({stale: total, type: 'planned'})
    let failed = 0
    for (let done = 1; done <= total; done++) {
      if (done === failedAt) failed++
      onEvent({done, failed, total, type: 'deleting'})
    }
    return lines
  }

  it('off a terminal: the plan, a line per tenth of the deletes, and the result', async function () {
    const lines = await run('lines', 1000, 500)
    expect(lines[0]).to.equal('found 1000 stale objects')
    expect(lines.slice(1, -1)).to.deep.equal([
      'deleting stale objects: 1/1000',
      'deleting stale objects: 100/1000',
      'deleting stale objects: 200/1000',
      'deleting stale objects: 300/1000',
      'deleting stale objects: 400/1000',
      'deleting stale objects: 500/1000 (1 failed)',
      'deleting stale objects: 600/1000 (1 failed)',
      'deleting stale objects: 700/1000 (1 failed)',
      'deleting stale objects: 800/1000 (1 failed)',
      'deleting stale objects: 900/1000 (1 failed)',
    ])
    expect(lines.at(-1)).to.equal('deleted 999 of 1000 stale objects, 1 failed')
  })

  it('a small cleanup gets no per-tenth lines; silent mode gets nothing', async function () {
    expect(await run('lines', 50)).to.deep.equal(['found 50 stale objects', 'deleted 50 of 50 stale objects'])
    expect(await run('silent', 1000)).to.deep.equal([])
  })
})
