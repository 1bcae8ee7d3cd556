import {expect} from 'chai'

import {RateLimiter, reserveToken, type TokenBucketState} from '../../../src/lib/kube/rate-limiter.js'
import {rejection} from '../../support/thrown.js'

/** Reserves one token per entry of `times`, threading the state; returns each wait. */
function waits(start: TokenBucketState, times: number[], qps: number, burst: number): {state: TokenBucketState; waits: number[]} {
  let state = start
  const out: number[] = []
  for (const now of times) {
    const r = reserveToken(state, now, qps, burst)
    state = r.state
    out.push(r.waitMs)
  }
  return {state, waits: out}
}

describe('reserveToken', () => {
  const cases: Array<{title: string; qps: number; burst: number; times: number[]; waits: number[]}> = [
    {burst: 3, qps: 10, times: [0, 0, 0], title: 'the burst is available at once', waits: [0, 0, 0]},
    {burst: 3, qps: 10, times: [0, 0, 0, 0, 0, 0], title: 'then each extra token waits 1000/qps longer', waits: [0, 0, 0, 100, 200, 300]},
    {burst: 1, qps: 4, times: [0, 0, 0], title: 'burst 1 at 4 qps: 0, 250, 500', waits: [0, 250, 500]},
    {burst: 2, qps: 3, times: [0, 0, 0, 0], title: 'rounds the wait up to whole milliseconds', waits: [0, 0, 334, 667]},
    {burst: 1, qps: 10, times: [0, 100, 200, 300], title: 'requests at exactly qps never wait', waits: [0, 0, 0, 0]},
    {burst: 1, qps: 10, times: [0, 50, 100], title: 'refills partially over time', waits: [0, 50, 100]},
    {burst: 5, qps: 10, times: [0, 0, 0, 0, 0, 0, 1000], title: 'a second refills qps tokens after a deficit', waits: [0, 0, 0, 0, 0, 100, 0]},
    {burst: 1, qps: 0.5, times: [0, 0], title: 'fractional qps: 0.5/s waits 2s', waits: [0, 2000]},
  ]
  for (const c of cases) {
    it(c.title, () => {
      expect(waits({at: 0, tokens: c.burst}, c.times, c.qps, c.burst).waits).to.deep.equal(c.waits)
    })
  }

  it('records the reservation time and the tokens left (negative when in debt)', () => {
    expect(reserveToken({at: 0, tokens: 2}, 0, 10, 2).state).to.deep.equal({at: 0, tokens: 1})
    expect(reserveToken({at: 0, tokens: 0}, 0, 10, 2)).to.deep.equal({state: {at: 0, tokens: -1}, waitMs: 100})
    expect(reserveToken({at: 1000, tokens: 0}, 1500, 10, 20).state).to.deep.equal({at: 1500, tokens: 4})
  })

  it('never holds more than burst tokens after a long idle', () => {
    const idle = reserveToken({at: 0, tokens: 3}, 1_000_000_000, 10, 3)
    expect(idle.state.tokens).to.equal(2) // refilled to 3 (not 10^7), minus the one reserved
    const after = waits(idle.state, [1_000_000_000, 1_000_000_000, 1_000_000_000, 1_000_000_000], 10, 3)
    expect([idle.waitMs, ...after.waits]).to.deep.equal([0, 0, 0, 100, 200])
  })

  it('pays back a deficit before handing out free tokens again', () => {
    const deep = waits({at: 0, tokens: 2}, [0, 0, 0, 0, 0, 0], 10, 2) // tokens now -4
    expect(deep.state.tokens).to.equal(-4)
    // 300 ms later only 3 tokens came back: still one in debt, so the next one waits 200 ms.
    expect(reserveToken(deep.state, 300, 10, 2).waitMs).to.equal(200)
  })
})

describe('RateLimiter', () => {
  const invalid: Array<[title: string, qps: number, burst: number]> = [
    ['qps 0', 0, 1],
    ['qps negative', -1, 1],
    ['qps NaN', Number.NaN, 1],
    ['qps Infinity', Number.POSITIVE_INFINITY, 1],
    ['burst 0', 10, 0],
    ['burst negative', 10, -2],
    ['burst 1.5', 10, 1.5],
    ['burst NaN', 10, Number.NaN],
  ]
  for (const [title, qps, burst] of invalid) {
    it(`rejects ${title} with a RangeError`, () => {
      expect(() => new RateLimiter(qps, burst, () => 0)).to.throw(RangeError, title.startsWith('qps') ? /qps/ : /burst/)
    })
  }

  it('accepts fractional qps and burst 1', () => {
    const limiter = new RateLimiter(0.5, 1, () => 0)
    expect(limiter.qps).to.equal(0.5)
    expect(limiter.burst).to.equal(1)
  })

  it('hands out the burst without waiting', async () => {
    let calls = 0
    const limiter = new RateLimiter(1, 3, () => {
      calls++
      return 5000
    })
    const started = performance.now()
    for (let i = 0; i < 3; i++) await limiter.acquire()
    expect(performance.now() - started).to.be.lessThan(50)
    expect(calls).to.equal(4) // once in the constructor, once per acquire
  })

  it('waits (and so can be aborted) once the burst is spent', async () => {
    const limiter = new RateLimiter(0.001, 1, () => 0) // the second token would take 1000 s
    await limiter.acquire()
    const controller = new AbortController()
    controller.abort()
    expect((await rejection(limiter.acquire(controller.signal))).name).to.equal('AbortError')
  })
})

describe('reserveToken with a clock that steps back', () => {
  it('refills nothing and does not drain the bucket', () => {
    const {state, waitMs} = reserveToken({at: 10_000_000, tokens: 100}, 10_000_000 - 3_600_000, 50, 100)
    expect(waitMs).to.equal(0)
    expect(state.tokens).to.equal(99)
  })
})
