import {expect} from 'chai'

import {EventBatcher, type Timers} from '../../../src/lib/agent/event-batcher.js'

/** A clock that moves only when told: timers fire in time order as it passes them. */
class VirtualTimers implements Timers {
  #now = 0
  #next = 0
  readonly #timers = new Map<number, {at: number; fn: () => void}>()

  now(): number {
    return this.#now
  }

  set(fn: () => void, ms: number): unknown {
    const id = ++this.#next
    this.#timers.set(id, {at: this.#now + ms, fn})
    return id
  }

  clear(handle: unknown): void {
    this.#timers.delete(handle as number)
  }

  get pending(): number {
    return this.#timers.size
  }

  /** Moves to `to`, firing each due timer at its own time and letting its promises settle. */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      const due = [...this.#timers].filter(([, t]) => t.at <= to).sort(([, a], [, b]) => a.at - b.at)[0]
      if (due === undefined) break
      this.#timers.delete(due[0])
      this.#now = due[1].at
      due[1].fn()
      await settle()
    }
    this.#now = to
    await settle()
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

function batcher(timers: VirtualTimers, process?: (events: number[]) => Promise<void>, leadingEdge?: boolean) {
  const batches: Array<{at: number; events: number[]}> = []
  const b = new EventBatcher<number>({
    leadingEdge,
    maxWaitMs: 1000,
    process: process ?? (async (events) => void batches.push({at: timers.now(), events})),
    quietMs: 200,
    timers,
  })
  return {b, batches}
}

describe('EventBatcher', function () {
  it('without leading edge, a lone event waits for the quiet window, and a burst still goes at max-wait', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers, undefined, false)
    await timers.advanceTo(5000)
    b.add(1)
    await timers.advanceTo(5199)
    expect(batches).to.deep.equal([])
    await timers.advanceTo(5200)
    expect(batches).to.deep.equal([{at: 5200, events: [1]}])
    // A steady stream, one event every 150 ms from 10 s: never quiet, so the first batch goes at max-wait.
    for (let t = 10_000; t <= 11_500; t += 150) {
      await timers.advanceTo(t)
      b.add(t)
    }
    expect(batches[1]).to.deep.equal({at: 11_000, events: [10_000, 10_150, 10_300, 10_450, 10_600, 10_750, 10_900]})
  })

  it('processes a lone event at once, with no timer (leading edge)', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    await timers.advanceTo(5000)
    b.add(1)
    await settle()
    expect(batches).to.deep.equal([{at: 5000, events: [1]}])
    expect(timers.pending).to.equal(0)
  })

  it('coalesces a burst: the first event at once, the rest once they pause for the quiet period', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    await timers.advanceTo(1000)
    for (const [at, event] of [[1000, 1], [1050, 2], [1100, 3], [1150, 4]] as const) {
      await timers.advanceTo(at)
      b.add(event)
    }
    await timers.advanceTo(1349)
    expect(batches).to.deep.equal([{at: 1000, events: [1]}])
    await timers.advanceTo(1400)
    expect(batches).to.deep.equal([{at: 1000, events: [1]}, {at: 1350, events: [2, 3, 4]}])
  })

  it('in a steady stream, a batch waits at most the max wait after its first event', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    await timers.advanceTo(1000)
    for (let t = 1000; t <= 4000; t += 100) {
      await timers.advanceTo(t)
      b.add(t)
    }
    await timers.advanceTo(5000)
    const [leading, ...rest] = batches
    expect(leading).to.deep.equal({at: 1000, events: [1000]})
    for (const batch of rest) expect(batch.at - batch.events[0], `batch at ${batch.at}`).to.be.at.most(1000)
    // Each batch goes max-wait after its first event: 1100 → 2100, 2100 → 3100, 3100 → 4100 (before the pause would).
    expect(rest.map((x) => x.at)).to.deep.equal([2100, 3100, 4100])
    expect(batches.flatMap((x) => x.events)).to.have.length(31) // nothing lost or repeated
  })

  it('never overlaps batches: events during processing wait for the next batch', async function () {
    const timers = new VirtualTimers()
    const seen: number[][] = []
    let running = 0
    let release!: () => void
    const {b} = batcher(timers, async (events) => {
      running++
      expect(running).to.equal(1)
      seen.push(events)
      await new Promise<void>((resolve) => (release = resolve))
      running--
    })
    await timers.advanceTo(1000)
    b.add(1)
    await settle()
    b.add(2)
    b.add(3)
    await timers.advanceTo(3000) // far past the due time, but batch 1 still runs
    expect(seen).to.deep.equal([[1]])
    release()
    await settle()
    await settle()
    expect(seen).to.deep.equal([[1], [2, 3]]) // due already: at once after the first
    release()
    await b.flush()
  })

  it('is leading again after a quiet spell, and flush()/stop() process or drop what waits', async function () {
    const timers = new VirtualTimers()
    const {b, batches} = batcher(timers)
    b.add(1)
    await timers.advanceTo(100)
    b.add(2)
    await b.flush()
    expect(batches.map((x) => x.events)).to.deep.equal([[1], [2]])
    await timers.advanceTo(1000)
    b.add(3)
    await settle()
    expect(batches.at(-1)).to.deep.equal({at: 1000, events: [3]})
    b.add(4)
    await b.stop()
    await timers.advanceTo(5000)
    expect(batches.flatMap((x) => x.events)).to.deep.equal([1, 2, 3])
  })

  it('a lone event that arrives while a slow batch runs goes as soon as that batch is done, not a quiet period later', async function () {
    const timers = new VirtualTimers()
    const seen: Array<{at: number; events: number[]}> = []
    let release!: () => void
    const {b} = batcher(timers, async (events) => {
      seen.push({at: timers.now(), events})
      if (events[0] === 1) await new Promise<void>((resolve) => (release = resolve))
    })
    b.add(1)
    await timers.advanceTo(500) // batch 1 still runs; the quiet window after event 1 is long past
    b.add(2)
    await timers.advanceTo(600)
    release()
    await settle()
    await settle()
    expect(seen).to.deep.equal([{at: 0, events: [1]}, {at: 600, events: [2]}])
  })
})
