import {expect} from 'chai'
import {getEventListeners} from 'node:events'

import {ConcurrencyWindow, baselineOf, baselinePeriodMs, cutCooldownMs, initialWindow, nextWindow, type Answer, type WindowState} from '../../../src/lib/kube/concurrency-window.js'

const options = {max: 64, min: 1}
const ok = (at: number, latencyMs = 5, route = 'DELETE'): Answer => ({at, kind: 'ok', latencyMs, route})
const throttled = (at: number): Answer => ({at, kind: 'throttled'})
const replay = (answers: readonly Answer[], from: WindowState = initialWindow(options)): WindowState => answers.reduce((s, a) => nextWindow(s, a, options), from)

describe('concurrency window (AIMD on the server answers)', () => {
  it('starts at 8 and grows by one per answer until the first cut (slow start)', () => {
    expect(initialWindow(options).limit).to.equal(8)
    expect(replay([ok(1), ok(2), ok(3)]).limit).to.equal(11)
  })

  it('starts where the client says, within min and max', () => {
    expect(initialWindow({...options, initial: 32}).limit).to.equal(32)
    expect(initialWindow({initial: 100, max: 64, min: 1}).limit).to.equal(64)
    expect(new ConcurrencyWindow({initial: 32, max: 64, min: 1}).stats).to.include({limit: 32, lowest: 32})
  })

  it('never grows past max, nor starts above it', () => {
    expect(replay(Array.from({length: 200}, (_, i) => ok(i))).limit).to.equal(64)
    expect(initialWindow({max: 4, min: 1}).limit).to.equal(4)
  })

  it('halves on a 429 and leaves slow start', () => {
    const cut = replay([ok(1), ok(2), throttled(3)]) // 10 -> 5
    expect(cut).to.include({limit: 5, slowStart: false})
  })

  it('cuts once per cool-down however many 429s one burst brings', () => {
    const s = replay([throttled(1000), throttled(1001), throttled(1000 + cutCooldownMs - 1)])
    expect(s.limit).to.equal(4)
    expect(replay([throttled(1000 + cutCooldownMs)], s).limit).to.equal(2)
  })

  it('never falls below min', () => {
    expect(replay(Array.from({length: 10}, (_, i) => throttled(i * 1000))).limit).to.equal(1)
  })

  it('after a cut grows additively: about one per window of answers', () => {
    let s = replay([throttled(0)]) // 4, congestion avoidance
    for (let i = 0; i < 4; i++) s = nextWindow(s, ok(1000 + i), options)
    expect(s.limit).to.be.closeTo(5, 0.1)
  })

  it('shrinks by 10% when latency climbs far above the baseline, not for ordinary jitter', () => {
    const warm = replay([ok(1, 10), ok(2, 12), ok(3, 30)])
    expect(baselineOf(warm, 'DELETE')).to.equal(10)
    expect(replay([ok(1000, 45)], warm).limit).to.be.greaterThan(warm.limit) // 4.5x but only +35 ms: jitter
    expect(replay([ok(1000, 200)], warm).limit).to.be.closeTo(warm.limit * 0.9, 1e-9)
  })

  it('keeps the baseline at its minimum however long the load lasts, so sustained queueing keeps being seen', () => {
    let s = replay([ok(0, 10)])
    for (let i = 1; i <= 300; i++) s = nextWindow(s, ok(i * 20, 60), options)
    expect(baselineOf(s, 'DELETE')).to.equal(10)
  })

  it('forgets a baseline two periods old, so a server that got slower for good is not cut forever', () => {
    let s = replay([ok(0, 10)])
    for (let at = 1000; at <= 2 * baselinePeriodMs + 1000; at += 1000) s = nextWindow(s, ok(at, 60), options)
    expect(baselineOf(s, 'DELETE')).to.equal(60)
  })

  it('judges each kind of request against its own baseline: a slow list page does not cut the window', () => {
    const warm = replay([ok(1, 5, 'DELETE'), ok(2, 5, 'DELETE')])
    const listed = replay([ok(1000, 150, 'GET'), ok(1300, 160, 'GET')], warm)
    expect(listed.limit).to.be.greaterThan(warm.limit)
    expect(baselineOf(listed, 'GET')).to.equal(150)
  })

  it('grows only on answers to requests sent while the window was at least half full', () => {
    const s = initialWindow(options)
    const idle = nextWindow(s, {at: 1, filled: false, kind: 'ok', latencyMs: 5, route: 'GET'}, options)
    expect(idle.limit).to.equal(s.limit)
    expect(nextWindow(s, {at: 1, filled: true, kind: 'ok', latencyMs: 5, route: 'GET'}, options).limit).to.equal(s.limit + 1)
  })
})

describe('ConcurrencyWindow gate', () => {
  it('lets floor(limit) requests through and queues the rest until one leaves', async () => {
    const window = new ConcurrencyWindow({max: 2, min: 1})
    const first = await window.enter()
    await window.enter()
    let third = false
    const waiting = window.enter().then((leave) => {
      third = true
      return leave
    })
    await new Promise((r) => setImmediate(r))
    expect(third).to.equal(false)
    first('ok')
    ;(await waiting)('ok')
    expect(third).to.equal(true)
  })

  it('counts 429s and records the lowest and highest window', async () => {
    let now = 0
    const window = new ConcurrencyWindow({max: 64, min: 1}, () => now)
    // 8 at once: those sent from the 4th on found the window half full, so 5 answers grow it: 8 -> 13.
    const leaves = await Promise.all(Array.from({length: 8}, () => window.enter()))
    for (const leave of leaves) leave('ok')
    now = 1000
    ;(await window.enter())('throttled') // 13 -> 6.5
    expect(window.stats).to.deep.equal({highest: 13, limit: 6, lowest: 6, throttled: 1})
  })

  it('rejects a waiter whose signal aborts, and the slot it would have taken goes to the next one', async () => {
    const window = new ConcurrencyWindow({max: 1, min: 1})
    const held = await window.enter()
    const controller = new AbortController()
    const cancelled = window.enter(controller.signal)
    const next = window.enter()
    controller.abort()
    const error = await cancelled.then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error?.message).to.match(/cancelled while waiting/)
    held('none')
    ;(await next)('ok')
  })

  it('adds one abort listener to a signal however many requests wait on it (no MaxListeners warning)', async () => {
    const window = new ConcurrencyWindow({max: 1, min: 1})
    const held = await window.enter()
    const controller = new AbortController()
    const waiters = Array.from({length: 20}, () => window.enter(controller.signal).then((leave) => leave('none')))
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1)
    held('none')
    await Promise.all(waiters)
  })

  it('refuses a window whose bounds make no sense', () => {
    expect(() => new ConcurrencyWindow({max: 0, min: 1})).to.throw(RangeError)
  })
})
