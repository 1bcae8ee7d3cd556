import {expect} from 'chai'

import {Backoff, backoffMs} from '../../src/lib/backoff.js'

describe('backoff', () => {
  it('doubles from the base up to the cap', () => {
    const policy = {baseMs: 100, maxMs: 1000}
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffMs(policy, n))).to.deep.equal([100, 200, 400, 800, 1000, 1000])
  })

  it('counts failures in a row and starts over after a success', () => {
    const backoff = new Backoff({baseMs: 1000, maxMs: 30_000})
    expect([backoff.next(), backoff.next(), backoff.next()]).to.deep.equal([1000, 2000, 4000])
    expect(backoff.failures).to.equal(3)
    backoff.reset()
    expect(backoff.next()).to.equal(1000)
  })

  it('never waits longer than the cap, however long it fails', () => {
    const backoff = new Backoff({baseMs: 200, maxMs: 5000})
    for (let i = 0; i < 2000; i++) backoff.next()
    expect(backoff.next()).to.equal(5000)
  })
})
