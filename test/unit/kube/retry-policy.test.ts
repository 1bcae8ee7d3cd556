import {expect} from 'chai'

import type {StatusClass} from '../../../src/lib/kube/api-error.js'
import {defaultRetryPolicy, retryDelayMs, type AttemptFailure, type RetryPolicy} from '../../../src/lib/kube/retry-policy.js'

const policy: RetryPolicy = {baseDelayMs: 100, maxDelayMs: 5000, maxRetries: 4}
const network: AttemptFailure = {kind: 'network'}
const status = (statusClass: StatusClass, retryAfterSeconds?: number): AttemptFailure => ({kind: 'status', retryAfterSeconds, statusClass})

describe('retryDelayMs', () => {
  it('has sensible defaults', () => {
    expect(defaultRetryPolicy).to.deep.equal({baseDelayMs: 200, maxDelayMs: 10_000, maxRetries: 5})
  })

  describe('which failures are retried', () => {
    const cases: Array<[title: string, failure: AttemptFailure, retried: boolean]> = [
      ['network error', network, true],
      ['429 TooManyRequests', status('TooManyRequests'), true],
      ['5xx Unavailable', status('Unavailable'), true],
      ['NotFound', status('NotFound'), false],
      ['Forbidden', status('Forbidden'), false],
      ['Unauthorized', status('Unauthorized'), false],
      ['Conflict', status('Conflict'), false],
      ['Gone', status('Gone'), false],
      ['BadRequest', status('BadRequest'), false],
      ['Invalid', status('Invalid'), false],
      ['Other (e.g. 418)', status('Other'), false],
      ['NotFound even with a Retry-After', status('NotFound', 1), false],
    ]
    for (const [title, failure, retried] of cases) {
      it(`${title}: ${retried ? 'retried' : 'final'}`, () => {
        const delay = retryDelayMs(policy, 0, failure, 0.5)
        if (retried) expect(delay).to.be.a('number').and.be.greaterThan(0)
        else expect(delay).to.equal(undefined)
      })
    }
  })

  describe('maxRetries', () => {
    const cases: Array<[attempt: number, retried: boolean]> = [
      [0, true],
      [3, true],
      [4, false],
      [5, false],
      [100, false],
    ]
    for (const [attempt, retried] of cases) {
      it(`attempt ${attempt} of maxRetries 4: ${retried ? 'retried' : 'final'}`, () => {
        expect(retryDelayMs(policy, attempt, network, 0) !== undefined).to.equal(retried)
        expect(retryDelayMs(policy, attempt, status('Unavailable', 1), 0) !== undefined).to.equal(retried)
      })
    }

    it('never retries with maxRetries 0, even for a retryable failure with Retry-After', () => {
      expect(retryDelayMs({...policy, maxRetries: 0}, 0, status('TooManyRequests', 2), 0.5)).to.equal(undefined)
    })
  })

  describe('back-off bounds (full jitter between half the ceiling and the ceiling)', () => {
    // ceiling = min(maxDelayMs, baseDelayMs * 2^attempt) = 100, 200, 400, 800 for attempts 0..3
    const cases: Array<[attempt: number, low: number, high: number]> = [
      [0, 50, 100],
      [1, 100, 200],
      [2, 200, 400],
      [3, 400, 800],
    ]
    for (const [attempt, low, high] of cases) {
      it(`attempt ${attempt}: random 0 -> ${low}, random 1 -> ${high}, random 0.5 in between`, () => {
        expect(retryDelayMs(policy, attempt, network, 0)).to.equal(low)
        expect(retryDelayMs(policy, attempt, network, 1)).to.equal(high)
        expect(retryDelayMs(policy, attempt, network, 0.5)).to.equal((low + high) / 2)
      })
    }

    it('grows with the attempt for the same random draw', () => {
      const big: RetryPolicy = {baseDelayMs: 10, maxDelayMs: 1_000_000, maxRetries: 10}
      const delays = Array.from({length: 10}, (_, attempt) => retryDelayMs(big, attempt, network, 0.3)!)
      for (let i = 1; i < delays.length; i++) expect(delays[i]).to.be.greaterThan(delays[i - 1])
    })

    it('caps the ceiling at maxDelayMs', () => {
      const long: RetryPolicy = {...policy, maxRetries: 50}
      // 100 * 2^6 = 6400 > 5000
      expect(retryDelayMs(long, 6, network, 1)).to.equal(5000)
      expect(retryDelayMs(long, 6, network, 0)).to.equal(2500)
      expect(retryDelayMs(long, 40, network, 1)).to.equal(5000)
      expect(retryDelayMs(long, 40, status('Unavailable'), 1)).to.equal(5000)
    })

    it('returns whole milliseconds', () => {
      const odd: RetryPolicy = {baseDelayMs: 3, maxDelayMs: 1000, maxRetries: 5}
      const delay = retryDelayMs(odd, 0, network, 0.3)!
      expect(Number.isInteger(delay)).to.equal(true)
      expect(delay).to.equal(2) // 1.5 + 0.45 = 1.95
    })
  })

  describe('Retry-After', () => {
    it('wins when longer than the back-off', () => {
      expect(retryDelayMs(policy, 0, status('TooManyRequests', 3), 1)).to.equal(3000)
      expect(retryDelayMs(policy, 0, status('Unavailable', 2), 0)).to.equal(2000)
    })

    it('wins even above maxDelayMs', () => {
      expect(retryDelayMs(policy, 0, status('TooManyRequests', 30), 0)).to.equal(30_000)
    })

    it('loses when shorter than the back-off', () => {
      // attempt 3: back-off 400..800
      expect(retryDelayMs(policy, 3, status('TooManyRequests', 0), 1)).to.equal(800)
    })

    it('is capped by maxDelayMs as usual when the back-off wins', () => {
      const long: RetryPolicy = {...policy, maxRetries: 50}
      expect(retryDelayMs(long, 20, status('TooManyRequests', 1), 1)).to.equal(5000)
    })
  })
})
