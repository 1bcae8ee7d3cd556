import {expect} from 'chai'

import {RetryTimer} from '../../src/lib/retry-timer.js'
import {settle, VirtualTimers} from '../support/virtual-timers.js'

/** A RetryTimer on a virtual clock, and when each of its attempts ran. */
function retrying(backoff: {baseMs: number; maxMs: number; jitter?: readonly [number, number]}, random?: () => number) {
  const timers = new VirtualTimers()
  const timer = new RetryTimer({backoff, random, timers})
  const ran: number[] = []
  const attempt = (): void => void ran.push(timers.now())
  return {attempt, ran, timer, timers}
}

describe('RetryTimer', function () {
  it('runs the attempt after the back-off, longer after each failure, from the base again after a success', async function () {
    const {attempt, ran, timer, timers} = retrying({baseMs: 100, maxMs: 300})
    const waits: number[] = []
    for (let i = 0; i < 4; i++) {
      waits.push(timer.failed(attempt))
      await timers.advanceTo(timers.now() + 1000)
    }
    expect(waits).to.deep.equal([100, 200, 300, 300])
    expect(ran).to.deep.equal([100, 1200, 2300, 3300])
    expect(timer.failures).to.equal(4)
    timer.succeeded()
    expect(timer.failed(attempt)).to.equal(100)
  })

  it('schedules one attempt at a time: a failure meanwhile replaces the scheduled one', async function () {
    const {attempt, ran, timer, timers} = retrying({baseMs: 100, maxMs: 10_000})
    timer.failed(attempt)
    await timers.advanceTo(50)
    expect(timer.pending).to.equal(true)
    timer.failed(attempt) // 200 ms from 50
    expect(timers.pending).to.equal(1)
    await timers.advanceTo(1000)
    expect(ran).to.deep.equal([250])
    expect(timer.pending).to.equal(false)
  })

  it('a success leaves the scheduled attempt in place', async function () {
    const {attempt, ran, timer, timers} = retrying({baseMs: 100, maxMs: 1000})
    timer.failed(attempt)
    timer.succeeded()
    await timers.advanceTo(500)
    expect(ran).to.deep.equal([100])
  })

  it('cancel() drops the scheduled attempt; stop() too, and schedules nothing more (twice is fine)', async function () {
    const {attempt, ran, timer, timers} = retrying({baseMs: 100, maxMs: 1000})
    timer.failed(attempt)
    timer.cancel()
    expect(timers.pending).to.equal(0)
    timer.failed(attempt)
    timer.stop()
    timer.stop()
    expect(timer.failed(attempt), 'nothing scheduled once stopped').to.equal(0)
    await timers.advanceTo(10_000)
    expect(ran).to.deep.equal([])
    expect(timers.pending).to.equal(0)
    expect(timer.pending).to.equal(false)
  })

  it('draws jittered waits from the random function given', function () {
    const draws = [0, 1, 0.5]
    const {attempt, timer} = retrying({baseMs: 1000, jitter: [0.8, 1.2], maxMs: 30_000}, () => draws.shift()!)
    expect([timer.failed(attempt), timer.failed(attempt), timer.failed(attempt)]).to.deep.equal([800, 2400, 4000])
  })

  it('rejects a back-off that is not a finite number of milliseconds >= 0', function () {
    expect(() => new RetryTimer({backoff: {baseMs: -1, maxMs: 10}})).to.throw(RangeError, 'Expected `baseMs` to be a finite number >= 0, got -1')
    expect(() => new RetryTimer({backoff: {baseMs: 1, maxMs: Number.NaN}})).to.throw(RangeError, 'Expected `maxMs` to be a finite number >= 0, got NaN')
  })

  describe('wait() (for a loop that retries by itself)', function () {
    it('resolves true after the back-off, which grows with each wait and starts over after a success', async function () {
      const {timer, timers} = retrying({baseMs: 100, maxMs: 300})
      const signal = new AbortController().signal
      /** How long one wait() took on the virtual clock, to the millisecond. */
      const waitedMs = async (): Promise<number> => {
        const from = timers.now()
        let done = false
        const waited = timer.wait(signal).then((ran) => {
          done = true
          return ran
        })
        while (!done) await timers.advanceTo(timers.now() + 1)
        expect(await waited).to.equal(true)
        return timers.now() - from
      }
      expect([await waitedMs(), await waitedMs(), await waitedMs(), await waitedMs()]).to.deep.equal([100, 200, 300, 300])
      timer.succeeded()
      expect(await waitedMs()).to.equal(100)
    })

    it('with the failures counted by the caller, waits for that many and leaves its own count alone', async function () {
      const {timer, timers} = retrying({baseMs: 100, maxMs: 1000})
      const waited = timer.wait(new AbortController().signal, 4)
      await timers.advanceTo(799)
      expect(timer.pending).to.equal(true)
      await timers.advanceTo(800)
      expect(await waited).to.equal(true)
      expect(timer.failures).to.equal(0)
    })

    it('resolves false at once when its signal aborts or the timer stops, leaving no timer behind', async function () {
      const {timer, timers} = retrying({baseMs: 100, maxMs: 1000})
      const controller = new AbortController()
      const aborted = timer.wait(controller.signal)
      controller.abort()
      expect(await aborted).to.equal(false)
      expect(timers.pending).to.equal(0)
      expect(await timer.wait(controller.signal), 'an aborted signal does not wait').to.equal(false)

      const stopped = timer.wait(new AbortController().signal)
      await settle()
      timer.stop()
      expect(await stopped).to.equal(false)
      expect(timers.pending).to.equal(0)
      expect(await timer.wait(new AbortController().signal), 'a stopped timer does not wait').to.equal(false)
    })
  })

  it("real timers are unref'd: a scheduled retry does not keep the process alive", function () {
    const timer = new RetryTimer({backoff: {baseMs: 60_000, maxMs: 60_000}})
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    timer.failed(() => {})
    // An unref'd timer is not among the resources that keep the event loop alive.
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).to.equal(before)
    timer.stop()
  })
})
