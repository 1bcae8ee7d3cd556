import {expect} from 'chai'

import {EventBatcher} from '../../src/lib/event-batcher.js'
import {settle, VirtualTimers} from '../support/virtual-timers.js'

function batcher(timers: VirtualTimers, process?: (events: number[]) => Promise<void>, quietMs?: number) {
  const batches: Array<{at: number; events: number[]}> = []
  const b = new EventBatcher<number>({
    maxWaitMs: 1000,
    process: process ?? (async (events) => void batches.push({at: timers.now(), events})),
    quietMs,
    timers,
  })
  return {b, batches}
}

/** A process() that holds each batch until released, and records when each started. */
function heldBatches(timers: VirtualTimers) {
  const seen: Array<{at: number; events: number[]}> = []
  const releases: Array<() => void> = []
  let running = 0
  const process = async (events: number[]): Promise<void> => {
    running++
    expect(running, 'batches overlap').to.equal(1)
    seen.push({at: timers.now(), events})
    await new Promise<void>((resolve) => releases.push(resolve))
    running--
  }
  const release = async (): Promise<void> => {
    releases.shift()?.()
    await settle()
    await settle()
  }
  return {process, release, seen}
}

describe('EventBatcher (group commit)', function () {
  it('processes an event that finds nothing running at once, with no timer', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    await timers.advanceTo(5000)
    b.add(1)
    await settle()
    expect(batches).to.deep.equal([{at: 5000, events: [1]}])
    expect(timers.pending).to.equal(0)
  })

  it('puts the events of one tick in one batch', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    b.add(1)
    b.add(2)
    b.add(3)
    await settle()
    expect(batches).to.deep.equal([{at: 0, events: [1, 2, 3]}])
  })

  it('an event after other recent events is not delayed: no quiet window by default', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    for (const at of [1000, 1050, 1100, 1150]) {
      await timers.advanceTo(at)
      b.add(at)
      await settle()
    }
    expect(batches).to.deep.equal([1000, 1050, 1100, 1150].map((at) => ({at, events: [at]})))
  })

  it('coalesces what arrives during a batch into the next, which starts as soon as the running one ends', async function () {
    const timers = new VirtualTimers()
    const held = heldBatches(timers)
    const {b} = batcher(timers, held.process)
    b.add(1)
    await settle()
    await timers.advanceTo(10)
    for (let i = 2; i <= 100; i++) b.add(i)
    await timers.advanceTo(3000) // batch 1 still runs
    expect(held.seen).to.deep.equal([{at: 0, events: [1]}])
    await held.release()
    expect(held.seen.map((x) => x.at)).to.deep.equal([0, 3000])
    expect(held.seen[1].events).to.have.length(99)
    await held.release()
    expect(b.busy).to.equal(false)
  })

  it('a storm of 10,000 events while batches run becomes a few batches, nothing lost or repeated', async function () {
    const timers = new VirtualTimers()
    const held = heldBatches(timers)
    const {b} = batcher(timers, held.process)
    for (let round = 0; round < 4; round++) {
      for (let i = 0; i < 2500; i++) b.add(round * 2500 + i)
      await settle()
      await timers.advanceTo(timers.now() + 5)
      if (round > 0) await held.release()
    }
    while (b.busy) await held.release()
    expect(held.seen.length).to.be.at.most(5)
    expect(held.seen.flatMap((x) => x.events)).to.deep.equal(Array.from({length: 10_000}, (_, i) => i))
  })

  it('with a quiet window, a batch waits for events to pause, at most max-wait after its first', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers, undefined, 200)
    await timers.advanceTo(5000)
    b.add(1)
    await timers.advanceTo(5199)
    expect(batches).to.deep.equal([])
    await timers.advanceTo(5200)
    expect(batches).to.deep.equal([{at: 5200, events: [1]}])
    // A steady stream, one event every 150 ms from 10 s: never quiet, so the batch goes at max-wait.
    for (let t = 10_000; t <= 11_500; t += 150) {
      await timers.advanceTo(t)
      b.add(t)
    }
    expect(batches[1]).to.deep.equal({at: 11_000, events: [10_000, 10_150, 10_300, 10_450, 10_600, 10_750, 10_900]})
  })

  it('with a quiet window, what arrived during a long batch goes once it is due, at once when already due', async function () {
    const timers = new VirtualTimers()
    const held = heldBatches(timers)
    const {b} = batcher(timers, held.process, 200)
    b.add(1)
    await timers.advanceTo(200)
    await timers.advanceTo(300)
    b.add(2)
    await timers.advanceTo(1000) // due at 500, but batch 1 still runs
    expect(held.seen.map((x) => x.events)).to.deep.equal([[1]])
    await held.release()
    expect(held.seen).to.deep.equal([
      {at: 200, events: [1]},
      {at: 1000, events: [2]},
    ])
    await held.release()
  })

  it('flush() processes what waits; stop() drops it and lets the running batch finish', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers, undefined, 200)
    b.add(1)
    b.add(2)
    await b.flush()
    expect(batches).to.deep.equal([{at: 0, events: [1, 2]}])
    b.add(3)
    await b.stop()
    b.add(4)
    await timers.advanceTo(5000)
    expect(batches.flatMap((x) => x.events)).to.deep.equal([1, 2])
    expect(timers.pending).to.equal(0)
  })

  it('a failed batch is reported and the next event still goes', async function () {
    const timers = new VirtualTimers()
    const errors: unknown[] = []
    const seen: number[][] = []
    const b = new EventBatcher<number>({
      onError: (error) => errors.push(error),
      process: async (events) => {
        seen.push(events)
        if (events[0] === 1) throw new Error('boom')
      },
      timers,
    })
    b.add(1)
    await settle()
    b.add(2)
    await settle()
    expect(seen).to.deep.equal([[1], [2]])
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['boom'])
  })
})
