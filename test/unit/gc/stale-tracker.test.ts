import {expect} from 'chai'

import {gcKinds, nodeNameLabel, type GcKind} from '../../../src/lib/gc/kinds.js'
import {forgetStale, observeStale, type StaleSightings, recheckAtMs} from '../../../src/lib/gc/stale-tracker.js'
import type {StaleObject} from '../../../src/lib/gc/sweep-planner.js'

function kindNamed(name: string): GcKind {
  const kind = gcKinds.find((k) => k.kind === name)
  if (kind === undefined) throw new Error(`no gc kind ${name}`)
  return kind
}

const nodeFeature = kindNamed('NodeFeature')
const topology = kindNamed('NodeResourceTopology')

/** A NodeFeature of a deleted node, as planSweep would report it. */
function feature(uid: string, node: string): StaleObject {
  const meta = {labels: {[nodeNameLabel]: node}, name: `${node}-features`, namespace: 'nfd', uid}
  expect(nodeFeature.nodeOf(meta)).to.equal(node)
  return {kind: nodeFeature, meta, node, reason: 'node-gone'}
}

/** A NodeResourceTopology (named after its node) of a deleted node. */
function topologyOf(uid: string, node: string): StaleObject {
  const meta = {name: node, uid}
  expect(topology.nodeOf(meta)).to.equal(node)
  return {kind: topology, meta, node, reason: 'node-gone'}
}

/** A NodeFeature without the node-name label. */
function unlabelled(uid: string): StaleObject {
  const meta = {name: `orphan-${uid}`, namespace: 'nfd', uid}
  expect(nodeFeature.nodeOf(meta)).to.equal(undefined)
  return {kind: nodeFeature, meta, reason: 'no-node-label'}
}

const uids = (objects: readonly StaleObject[]) => objects.map((o) => o.meta.uid)
const none: StaleSightings = new Map()

describe('stale tracker', () => {
  describe('observeStale with no grace period', () => {
    const cases: Array<[title: string, stale: StaleObject[]]> = [
      ['one object', [feature('u1', 'n1')]],
      ['both kinds and an unlabelled one', [feature('u1', 'n1'), topologyOf('u2', 'n1'), unlabelled('u3')]],
    ]
    for (const [title, stale] of cases) {
      it(`${title}: everything is due on first sighting`, () => {
        const observation = observeStale(none, stale, 1000, 0, 'all')
        expect(uids(observation.due)).to.deep.equal(uids(stale))
        expect(observation.nextDueMs).to.equal(undefined)
        expect([...observation.sightings.keys()]).to.deep.equal(uids(stale))
      })
    }

    it('nothing stale: nothing due, nothing waiting', () => {
      const observation = observeStale(none, [], 1000, 0, 'all')
      expect(observation.due).to.deep.equal([])
      expect(observation.nextDueMs).to.equal(undefined)
      expect(observation.sightings.size).to.equal(0)
    })
  })

  describe('observeStale with a grace period', () => {
    const grace = 30_000
    const t0 = 1_000_000

    it('first sighting: not due; due at firstSeen + grace', () => {
      const observation = observeStale(none, [feature('u1', 'n1')], t0, grace, 'all')
      expect(observation.due).to.deep.equal([])
      expect(observation.nextDueMs).to.equal(t0 + grace)
      expect(observation.sightings.get('u1')).to.deep.include({firstSeenMs: t0})
    })

    describe('second sighting', () => {
      const cases: Array<[title: string, atMs: number, due: boolean]> = [
        ['at the same time', t0, false],
        ['1 ms before the grace period ends', t0 + grace - 1, false],
        ['exactly when the grace period ends', t0 + grace, true],
        ['long after', t0 + 10 * grace, true],
      ]
      for (const [title, atMs, due] of cases) {
        it(`${title}: ${due ? 'due' : 'not due'}`, () => {
          const first = observeStale(none, [feature('u1', 'n1')], t0, grace, 'all')
          const second = observeStale(first.sightings, [feature('u1', 'n1')], atMs, grace, 'all')
          expect(uids(second.due)).to.deep.equal(due ? ['u1'] : [])
          expect(second.nextDueMs).to.equal(due ? undefined : t0 + grace)
        })
      }
    })

    it('keeps the first sighting time across sightings (never reset)', () => {
      let sightings = none
      for (const at of [t0, t0 + 10_000, t0 + 20_000]) {
        sightings = observeStale(sightings, [feature('u1', 'n1')], at, grace, 'all').sightings
        expect(sightings.get('u1')?.firstSeenMs).to.equal(t0)
      }
      const last = observeStale(sightings, [feature('u1', 'n1')], t0 + grace, grace, 'all')
      expect(uids(last.due)).to.deep.equal(['u1'])
      expect(last.sightings.get('u1')?.firstSeenMs).to.equal(t0)
    })

    it('stores the latest object for a known uid', () => {
      const first = observeStale(none, [feature('u1', 'old-node')], t0, grace, 'all')
      const newer = feature('u1', 'old-node')
      const second = observeStale(first.sightings, [newer], t0 + 1, grace, 'all')
      expect(second.sightings.get('u1')?.object).to.equal(newer)
    })

    it('nextDueMs is the earliest of the waiting objects', () => {
      const first = observeStale(none, [feature('a', 'n1')], t0, grace, 'all')
      const second = observeStale(first.sightings, [topologyOf('b', 'n2'), feature('a', 'n1')], t0 + 5000, grace, 'all')
      expect(second.due).to.deep.equal([])
      expect(second.nextDueMs).to.equal(t0 + grace)
      const third = observeStale(second.sightings, [topologyOf('b', 'n2'), feature('a', 'n1')], t0 + grace, grace, 'all')
      expect(uids(third.due)).to.deep.equal(['a'])
      expect(third.nextDueMs).to.equal(t0 + 5000 + grace)
    })

    it('a re-created object (same name, new uid) starts its grace period over', () => {
      const first = observeStale(none, [feature('old-uid', 'n1')], t0, grace, 'all')
      const recreated = feature('new-uid', 'n1')
      expect(recreated.meta.name).to.equal(first.sightings.get('old-uid')?.object.meta.name)
      const second = observeStale(first.sightings, [recreated], t0 + grace, grace, 'all')
      expect(second.due).to.deep.equal([])
      expect(second.sightings.get('new-uid')?.firstSeenMs).to.equal(t0 + grace)
      expect(second.sightings.has('old-uid')).to.equal(false)
      expect(second.nextDueMs).to.equal(t0 + 2 * grace)
    })
  })

  describe('observeStale scope', () => {
    const grace = 10_000
    const earlier = observeStale(none, [feature('a', 'n1'), topologyOf('b', 'n2')], 0, grace, 'all').sightings

    it("'all' forgets objects it did not see stale again", () => {
      const observation = observeStale(earlier, [feature('a', 'n1')], 5000, grace, 'all')
      expect([...observation.sightings.keys()]).to.deep.equal(['a'])
    })

    it("'all' with nothing stale forgets everything", () => {
      const observation = observeStale(earlier, [], 5000, grace, 'all')
      expect(observation.sightings.size).to.equal(0)
      expect(observation.nextDueMs).to.equal(undefined)
    })

    it("'seen' keeps the sightings it did not look at", () => {
      const observation = observeStale(earlier, [feature('c', 'n3')], 5000, grace, 'seen')
      expect([...observation.sightings.keys()]).to.have.members(['a', 'b', 'c'])
      expect(observation.sightings.get('a')?.firstSeenMs).to.equal(0)
      expect(observation.sightings.get('c')?.firstSeenMs).to.equal(5000)
      expect(observation.nextDueMs).to.equal(grace)
    })

    // Only a second sighting makes an object due: a kept sighting past its grace period was not seen stale again
    // (its node may be back), so it is not due. It stays in the sightings for a later sweep to confirm or forget.
    it("'seen' does not report kept sightings past their grace period as due unless seen now", () => {
      const observation = observeStale(earlier, [feature('c', 'n3')], grace, grace, 'seen')
      expect(observation.due).to.deep.equal([])
      expect([...observation.sightings.keys()]).to.have.members(['a', 'b', 'c'])
      expect(observation.sightings.get('a')?.firstSeenMs).to.equal(0)
      expect(observation.sightings.get('b')?.firstSeenMs).to.equal(0)
      // a and b are past due, not in the future: only c waits.
      expect(observation.nextDueMs).to.equal(2 * grace)
    })

    it("'seen' long after the grace period: kept sightings still not due, nothing waits for them", () => {
      const observation = observeStale(earlier, [], 10 * grace, grace, 'seen')
      expect(observation.due).to.deep.equal([])
      expect([...observation.sightings.keys()]).to.have.members(['a', 'b'])
      expect(observation.nextDueMs).to.equal(undefined)
    })

    it("'seen' reports a kept sighting as due when it is seen again past its grace period", () => {
      const observation = observeStale(earlier, [feature('a', 'n1'), feature('c', 'n3')], grace, grace, 'seen')
      expect(uids(observation.due)).to.deep.equal(['a'])
      expect([...observation.sightings.keys()]).to.have.members(['a', 'b', 'c'])
      expect(observation.sightings.get('a')?.firstSeenMs).to.equal(0)
      expect(observation.nextDueMs).to.equal(2 * grace)
    })

    it("'seen' counts kept sightings not yet due in nextDueMs", () => {
      const later = observeStale(none, [feature('d', 'n4')], 8000, grace, 'all').sightings
      const observation = observeStale(later, [feature('c', 'n3')], 12_000, grace, 'seen')
      expect(observation.due).to.deep.equal([])
      expect(observation.nextDueMs).to.equal(8000 + grace)
    })

    it("'seen' with a grace period of 0: only what is seen now is due", () => {
      const kept = observeStale(none, [feature('a', 'n1')], 0, 0, 'all').sightings
      const observation = observeStale(kept, [feature('c', 'n3')], 1000, 0, 'seen')
      expect(uids(observation.due)).to.deep.equal(['c'])
      expect([...observation.sightings.keys()]).to.have.members(['a', 'c'])
      expect(observation.nextDueMs).to.equal(undefined)
    })

    it('does not modify the sightings passed in', () => {
      observeStale(earlier, [feature('c', 'n3')], 5000, grace, 'seen')
      observeStale(earlier, [], 5000, grace, 'all')
      expect([...earlier.keys()]).to.deep.equal(['a', 'b'])
    })
  })

  describe('forgetStale', () => {
    const sightings = observeStale(none, [feature('a', 'n1'), feature('b', 'n2'), topologyOf('c', 'n3')], 0, 1000, 'all').sightings
    const cases: Array<[title: string, forget: Iterable<string>, left: string[]]> = [
      ['nothing', [], ['a', 'b', 'c']],
      ['one', ['b'], ['a', 'c']],
      ['several', ['a', 'c'], ['b']],
      ['all', ['a', 'b', 'c'], []],
      ['unknown uids are ignored', ['x', 'y'], ['a', 'b', 'c']],
      ['duplicates', ['a', 'a'], ['b', 'c']],
      ['from a Set', new Set(['c']), ['a', 'b']],
    ]
    for (const [title, forget, left] of cases) {
      it(title, () => {
        expect([...forgetStale(sightings, forget).keys()]).to.deep.equal(left)
      })
    }

    it('does not modify the sightings passed in', () => {
      forgetStale(sightings, ['a', 'b', 'c'])
      expect(sightings.size).to.equal(3)
    })
  })
})

describe('recheckAtMs', () => {
  const sighting = (firstSeenMs: number) => ({firstSeenMs, object: {} as never})
  const at = (entries: number[], now: number, grace: number) => recheckAtMs(new Map(entries.map((t, i) => [`u${i}`, sighting(t)])), now, grace)

  it('is undefined when nothing is pending', () => {
    expect(at([], 1000, 30_000)).to.equal(undefined)
  })

  it('is the earliest due time of pending sightings', () => {
    expect(at([5000, 2000, 9000], 10_000, 30_000)).to.equal(32_000)
  })

  it('looks at a past-due sighting one grace period from now, not at once', () => {
    expect(at([0], 100_000, 30_000)).to.equal(130_000)
  })

  it('waits at least 1 s for past-due sightings with a tiny grace period', () => {
    expect(at([0], 5000, 10)).to.equal(6000)
  })

  it('prefers a future due time that comes before the past-due re-look', () => {
    expect(at([0, 95_000], 100_000, 30_000)).to.equal(125_000)
  })
})
