import {expect} from 'chai'

import {afterList, afterWait, afterWatch, failuresOf, initialInformerState, reconnectDelayMs, vanished, watchOpened, type Ending, type InformerState} from '../../../src/lib/kube/informer-state.js'

const listing = (failures: number): InformerState => ({failures, phase: 'listing'})
const watching = (resourceVersion: string, failures: number): InformerState => ({failures, phase: 'watching', resourceVersion})
const waiting = (failures: number, resourceVersion?: string): InformerState => (resourceVersion === undefined ? {failures, phase: 'waiting'} : {failures, phase: 'waiting', resourceVersion})
const stopped: InformerState = {phase: 'stopped'}

describe('informer state', () => {
  it('starts by listing with no failures', () => {
    expect(initialInformerState).to.deep.equal({failures: 0, phase: 'listing'})
  })

  describe('afterList', () => {
    const cases: Array<[title: string, from: InformerState, result: Parameters<typeof afterList>[1], expected: InformerState]> = [
      ['success from a fresh list: watch from the list rv', listing(0), {ok: true, resourceVersion: '100'}, watching('100', 0)],
      ['success after failures: failures are forgotten', listing(4), {ok: true, resourceVersion: '7'}, watching('7', 0)],
      ['failure from a fresh list: wait, 1 failure', listing(0), {ok: false}, waiting(1)],
      ['failure after 2 failures: wait, 3 failures', listing(2), {ok: false}, waiting(3)],
    ]
    for (const [title, from, result, expected] of cases) {
      it(title, () => {
        expect(afterList(from, result)).to.deep.equal(expected)
      })
    }

    it('a failed list leaves no resourceVersion to resume from', () => {
      const next = afterList(listing(0), {ok: false})
      expect(next).to.not.have.property('resourceVersion')
    })

    describe('is ignored unless listing', () => {
      const others: Array<[title: string, from: InformerState]> = [
        ['watching', watching('5', 0)],
        ['watching after failures', watching('5', 3)],
        ['waiting', waiting(2, '5')],
        ['waiting without rv', waiting(1)],
        ['stopped', stopped],
      ]
      for (const [title, from] of others) {
        for (const result of [{ok: true, resourceVersion: '9'} as const, {ok: false} as const]) {
          it(`${title} + list ${result.ok ? 'ok' : 'failed'}: unchanged`, () => {
            expect(afterList(from, result)).to.equal(from)
          })
        }
      }
    })
  })

  describe('afterWatch', () => {
    const cases: Array<[title: string, from: InformerState, ending: Ending, lastRv: string, expected: InformerState]> = [
      ['closed: watch again from the last rv, no back-off', watching('100', 0), 'closed', '120', watching('120', 0)],
      ['closed after failures: watch again, failures reset', watching('100', 3), 'closed', '120', watching('120', 0)],
      ['gone (410): relist with failures reset', watching('100', 0), 'gone', '120', listing(0)],
      ['gone (410) after failures: relist with failures reset', watching('100', 4), 'gone', '120', listing(0)],
      ['failed: wait with the last rv kept, 1 failure', watching('100', 0), 'failed', '120', waiting(1, '120')],
      ['failed right after resuming from 2 failures: wait, 3 failures', watching('100', 2), 'failed', '120', waiting(3, '120')],
    ]
    for (const [title, from, ending, lastRv, expected] of cases) {
      it(title, () => {
        expect(afterWatch(from, ending, lastRv)).to.deep.equal(expected)
      })
    }

    describe('is ignored unless watching', () => {
      const others: Array<[title: string, from: InformerState]> = [
        ['listing', listing(1)],
        ['waiting', waiting(2, '5')],
        ['stopped', stopped],
      ]
      for (const [title, from] of others) {
        for (const ending of ['closed', 'gone', 'failed'] as const) {
          it(`${title} + watch ${ending}: unchanged`, () => {
            expect(afterWatch(from, ending, '999')).to.equal(from)
          })
        }
      }
    })
  })

  describe('afterWait', () => {
    const cases: Array<[title: string, from: InformerState, expected: InformerState]> = [
      ['rv known: resume watching from it, failures kept', waiting(1, '42'), watching('42', 1)],
      ['rv known after many failures: resume watching, failures kept', waiting(6, '42'), watching('42', 6)],
      ['no rv: list again, failures kept', waiting(1), listing(1)],
      ['no rv after 3 failures: list, failures 3', waiting(3), listing(3)],
    ]
    for (const [title, from, expected] of cases) {
      it(title, () => {
        expect(afterWait(from)).to.deep.equal(expected)
      })
    }

    describe('is ignored unless waiting', () => {
      const others: Array<[title: string, from: InformerState]> = [
        ['listing', listing(2)],
        ['watching', watching('3', 0)],
        ['watching after failures', watching('3', 2)],
        ['stopped', stopped],
      ]
      for (const [title, from] of others) {
        it(`${title}: unchanged`, () => {
          expect(afterWait(from)).to.equal(from)
        })
      }
    })
  })

  describe('watchOpened', () => {
    const cases: Array<[title: string, from: InformerState, expected: InformerState]> = [
      ['watching after failures: failures reset, rv kept', watching('42', 3), watching('42', 0)],
      ['watching after 1 failure: failures reset', watching('7', 1), watching('7', 0)],
      ['watching with no failures: stays the same', watching('42', 0), watching('42', 0)],
    ]
    for (const [title, from, expected] of cases) {
      it(title, () => {
        expect(watchOpened(from)).to.deep.equal(expected)
      })
    }

    it('does not modify the state passed in', () => {
      const from = watching('42', 3)
      watchOpened(from)
      expect(from).to.deep.equal(watching('42', 3))
    })

    describe('is ignored unless watching', () => {
      const others: Array<[title: string, from: InformerState]> = [
        ['listing', listing(0)],
        ['listing after failures', listing(2)],
        ['waiting', waiting(2, '5')],
        ['waiting without rv', waiting(1)],
        ['stopped', stopped],
      ]
      for (const [title, from] of others) {
        it(`${title}: unchanged`, () => {
          expect(watchOpened(from)).to.equal(from)
        })
      }
    })
  })

  describe('failuresOf', () => {
    const cases: Array<[title: string, state: InformerState, failures: number]> = [
      ['listing 0', listing(0), 0],
      ['listing 3', listing(3), 3],
      ['waiting 1', waiting(1), 1],
      ['waiting 5 with rv', waiting(5, '8'), 5],
      ['watching', watching('8', 0), 0],
      ['watching, resumed after 3 failures', watching('8', 3), 3],
      ['stopped', stopped, 0],
    ]
    for (const [title, state, failures] of cases) {
      it(`${title} → ${failures}`, () => {
        expect(failuresOf(state)).to.equal(failures)
      })
    }
  })

  describe('reconnectDelayMs', () => {
    describe('without jitter (random 0.5): 1 s doubling to a 30 s cap', () => {
      const cases: Array<[failures: number, delayMs: number]> = [
        [0, 1000],
        [1, 1000],
        [2, 2000],
        [3, 4000],
        [4, 8000],
        [5, 16_000],
        [6, 30_000],
        [7, 30_000],
        [50, 30_000],
        [2000, 30_000], // 2 ** 1999 is Infinity: still capped
      ]
      for (const [failures, delayMs] of cases) {
        it(`${failures} failures → ${delayMs} ms`, () => {
          expect(reconnectDelayMs(failures, 0.5)).to.equal(delayMs)
        })
      }
    })

    describe('jitter bounds: -20 % at random 0, +20 % at random 1', () => {
      const cases: Array<[failures: number, random: number, delayMs: number]> = [
        [0, 0, 800],
        [0, 1, 1200],
        [1, 0, 800],
        [1, 1, 1200],
        [3, 0, 3200],
        [3, 1, 4800],
        [6, 0, 24_000],
        [6, 1, 36_000],
        [2, 0.25, 1800],
        [2, 0.75, 2200],
      ]
      for (const [failures, random, delayMs] of cases) {
        it(`${failures} failures, random ${random} → ${delayMs} ms`, () => {
          expect(reconnectDelayMs(failures, random)).to.equal(delayMs)
        })
      }
    })

    it('stays within ±20 % of the ceiling for any random in [0, 1]', () => {
      for (let failures = 0; failures <= 8; failures++) {
        const ceiling = Math.min(30_000, 1000 * 2 ** Math.max(0, failures - 1))
        for (let i = 0; i <= 20; i++) {
          const delay = reconnectDelayMs(failures, i / 20)
          expect(delay, `failures ${failures}, random ${i / 20}`).to.be.within(0.8 * ceiling, 1.2 * ceiling)
        }
      }
    })

    it('returns whole milliseconds', () => {
      expect(Number.isInteger(reconnectDelayMs(1, 0.123_456))).to.equal(true)
      expect(reconnectDelayMs(1, 0.123_456)).to.equal(849)
    })

    describe('honours a custom base and cap', () => {
      const cases: Array<[failures: number, baseMs: number, maxMs: number, delayMs: number]> = [
        [1, 50, 1000, 50],
        [3, 50, 1000, 200],
        [10, 50, 1000, 1000],
        [3, 100, 250, 250],
      ]
      for (const [failures, baseMs, maxMs, delayMs] of cases) {
        it(`${failures} failures, base ${baseMs}, max ${maxMs} → ${delayMs} ms`, () => {
          expect(reconnectDelayMs(failures, 0.5, baseMs, maxMs)).to.equal(delayMs)
        })
      }
    })
  })

  describe('vanished', () => {
    const map = (...keys: string[]) => new Map(keys.map((k) => [k, {name: k}]))
    const cases: Array<[title: string, before: Map<string, {name: string}>, after: Map<string, {name: string}>, expected: string[]]> = [
      ['both empty', map(), map(), []],
      ['empty before: nothing vanished', map(), map('a', 'b'), []],
      ['empty after: everything vanished, in order', map('a', 'b', 'c'), map(), ['a', 'b', 'c']],
      ['nothing changed', map('a', 'b'), map('b', 'a'), []],
      ['one of three gone', map('a', 'b', 'c'), map('a', 'c'), ['b']],
      ['gone ones in the order of before', map('z', 'a', 'm', 'b'), map('a'), ['z', 'm', 'b']],
      ['new keys after do not count', map('a'), map('a', 'x', 'y'), []],
      ['replaced entirely', map('ns/a', 'ns/b'), map('ns/c'), ['ns/a', 'ns/b']],
    ]
    for (const [title, before, after, expected] of cases) {
      it(title, () => {
        expect(vanished(before, after).map((v) => v.name)).to.deep.equal(expected)
      })
    }

    it('returns the values from before (the last known objects), not from after', () => {
      const before = new Map([
        ['a', {rv: '1'}],
        ['b', {rv: '2'}],
      ])
      const after = new Map([['a', {rv: '9'}]])
      const gone = vanished(before, after)
      expect(gone).to.deep.equal([{rv: '2'}])
      expect(gone[0]).to.equal(before.get('b'))
    })

    it('does not modify its inputs', () => {
      const before = map('a', 'b')
      const after = map('a')
      vanished(before, after)
      expect([...before.keys()]).to.deep.equal(['a', 'b'])
      expect([...after.keys()]).to.deep.equal(['a'])
    })
  })

  describe('whole scenarios', () => {
    it('list ok → watch failed → wait → watch gone → list → watching', () => {
      let state: InformerState = initialInformerState
      state = afterList(state, {ok: true, resourceVersion: '10'})
      expect(state).to.deep.equal(watching('10', 0))
      expect(failuresOf(state)).to.equal(0)

      state = afterWatch(state, 'failed', '15')
      expect(state).to.deep.equal(waiting(1, '15'))
      expect(reconnectDelayMs(failuresOf(state), 0.5)).to.equal(1000)

      state = afterWait(state)
      expect(state).to.deep.equal(watching('15', 1))

      state = watchOpened(state)
      expect(state).to.deep.equal(watching('15', 0))

      state = afterWatch(state, 'gone', '15')
      expect(state).to.deep.equal(listing(0))

      state = afterList(state, {ok: true, resourceVersion: '20'})
      expect(state).to.deep.equal(watching('20', 0))

      state = afterWatch(state, 'closed', '27')
      expect(state).to.deep.equal(watching('27', 0))
    })

    it('a list that keeps failing backs off 1 s, 2 s, 4 s, then recovers', () => {
      let state: InformerState = initialInformerState
      const delays: number[] = []
      for (let i = 0; i < 3; i++) {
        state = afterList(state, {ok: false})
        expect(state.phase).to.equal('waiting')
        delays.push(reconnectDelayMs(failuresOf(state), 0.5))
        state = afterWait(state)
        expect(state.phase).to.equal('listing')
      }
      expect(delays).to.deep.equal([1000, 2000, 4000])
      state = afterList(state, {ok: true, resourceVersion: '3'})
      expect(state).to.deep.equal(watching('3', 0))
      expect(failuresOf(state)).to.equal(0)
    })

    it('stop wins: a stopped informer ignores every later result', () => {
      let state: InformerState = stopped
      state = afterList(state, {ok: true, resourceVersion: '1'})
      state = afterWatch(state, 'closed', '2')
      state = afterWait(state)
      state = watchOpened(state)
      state = afterList(state, {ok: false})
      expect(state).to.deep.equal(stopped)
    })

    // failuresOf's contract: "A watch that fails right after resuming counts as another failure, so back-off keeps
    // growing." With the API server down, every resumed watch fails at once; the back-off must grow, not stay at 1 s.
    it('a watch that fails again right after resuming backs off longer each time', () => {
      let state: InformerState = watching('10', 0)
      const delays: number[] = []
      for (let i = 0; i < 3; i++) {
        state = afterWatch(state, 'failed', '10')
        expect(state.phase).to.equal('waiting')
        delays.push(reconnectDelayMs(failuresOf(state), 0.5))
        state = afterWait(state)
        expect(state).to.deep.equal(watching('10', i + 1))
      }
      expect(delays).to.deep.equal([1000, 2000, 4000])
    })

    // Once the server accepts a watch again (watchOpened), the connection works: the next failure starts over at 1 s.
    it('a watch that opens between failures starts the back-off over at 1 s', () => {
      let state: InformerState = watching('10', 0)
      const delays: number[] = []
      for (let i = 0; i < 3; i++) {
        state = watchOpened(state)
        expect(state).to.deep.equal(watching('10', 0))
        state = afterWatch(state, 'failed', '10')
        expect(state).to.deep.equal(waiting(1, '10'))
        delays.push(reconnectDelayMs(failuresOf(state), 0.5))
        state = afterWait(state)
        expect(state).to.deep.equal(watching('10', 1))
      }
      expect(delays).to.deep.equal([1000, 1000, 1000])
    })

    it('failures grow until a watch opens, then start over', () => {
      let state: InformerState = watching('10', 0)
      const delays: number[] = []
      const fail = () => {
        state = afterWatch(state, 'failed', '10')
        delays.push(reconnectDelayMs(failuresOf(state), 0.5))
        state = afterWait(state)
      }
      fail()
      fail()
      fail()
      expect(state).to.deep.equal(watching('10', 3))
      state = watchOpened(state)
      expect(failuresOf(state)).to.equal(0)
      fail()
      fail()
      expect(delays).to.deep.equal([1000, 2000, 4000, 1000, 2000])
    })

    it('a list that succeeds after failing resets the count: the next failed watch waits 1 s', () => {
      let state: InformerState = initialInformerState
      state = afterList(state, {ok: false})
      expect(state).to.deep.equal(waiting(1))
      state = afterWait(state)
      expect(state).to.deep.equal(listing(1))
      state = afterList(state, {ok: true, resourceVersion: '5'})
      expect(state).to.deep.equal(watching('5', 0))
      state = afterWatch(state, 'failed', '6')
      expect(state).to.deep.equal(waiting(1, '6'))
      expect(reconnectDelayMs(failuresOf(state), 0.5)).to.equal(1000)
    })
  })
})
