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

  describe('jitter', () => {
    const policy = {baseMs: 1000, jitter: [0.5, 1] as const, maxMs: 8000}

    it('draws the wait between the fractions of the doubling value, by the random number passed in', () => {
      expect([0, 0.5, 1].map((random) => backoffMs(policy, 1, random))).to.deep.equal([500, 750, 1000])
      expect([0, 0.5, 1].map((random) => backoffMs(policy, 3, random))).to.deep.equal([2000, 3000, 4000])
      expect(
        [0, 1].map((random) => backoffMs(policy, 50, random)),
        "the cap is the doubling value's",
      ).to.deep.equal([4000, 8000])
    })

    it('full jitter ([0, 1]) spans nothing to the doubling value; ±20 % may exceed the cap by a fifth', () => {
      expect([0, 0.25, 1].map((random) => backoffMs({baseMs: 100, jitter: [0, 1], maxMs: 1000}, 2, random))).to.deep.equal([0, 50, 200])
      expect([0, 1].map((random) => backoffMs({baseMs: 1000, jitter: [0.8, 1.2], maxMs: 30_000}, 9, random))).to.deep.equal([24_000, 36_000])
    })

    it('is whole milliseconds', () => {
      expect(backoffMs({baseMs: 3, jitter: [0.5, 1], maxMs: 1000}, 1, 0.3)).to.equal(2) // 1.95
    })

    it('without a random number, or without jitter, is the doubling value itself', () => {
      expect(backoffMs(policy, 2)).to.equal(2000)
      expect(backoffMs({baseMs: 1000, maxMs: 8000}, 2, 0)).to.equal(2000)
      expect(new Backoff(policy).next(0)).to.equal(500)
    })
  })
})
