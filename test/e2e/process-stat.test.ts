import {expect} from 'chai'

import {processStat} from '../../src/lib/sys/pidfd.js'

// On the machine's own /proc (the parsing is tested on fake /proc trees in test/unit/sys/pidfd.test.ts).
describe('processStat on this machine', function () {
  it('reads this process', function () {
    const stat = processStat(process.pid)
    expect(stat?.state).to.match(/^[RS]$/)
    expect(stat?.startTime).to.be.a('bigint')
  })
})
