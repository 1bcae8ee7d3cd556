import {expect} from 'chai'

import {describeSource, retryDelayMs, sourceFailed, sourceUp, startingSource, type SourceState, type SupervisionPolicy} from '../../src/lib/source-health.js'

const policy: SupervisionPolicy = {backoff: {baseMs: 1000, maxMs: 30_000}, giveUpAfterMs: 120_000, stableMs: 60_000}

/** Applies steps at the given times: a string is a failure with that error, 'up' the source working. */
function run(steps: ReadonlyArray<readonly [number, string]>, p = policy): SourceState[] {
  const states: SourceState[] = []
  let state = startingSource
  for (const [now, step] of steps) {
    state = step === 'up' ? sourceUp(state, now) : sourceFailed(state, step, now, p)
    states.push(state)
  }
  return states
}

describe('source-health: the supervision rule', () => {
  it('a starting source that comes up is up; one that fails is down, retried after the shared back-off', () => {
    expect(sourceUp(startingSource, 5)).to.deep.equal({phase: 'up', since: 5})
    const down = sourceFailed(startingSource, 'EPROTONOSUPPORT', 5, policy)
    expect(down).to.deep.equal({downSince: 5, failures: 1, lastError: 'EPROTONOSUPPORT', phase: 'down', since: 5})
    expect(retryDelayMs(down, policy)).to.equal(1000)
  })

  it('counts failures in a row, doubling the wait up to the cap, and gives up once the run lasts giveUpAfterMs', () => {
    const states = run([
      [0, 'e1'],
      [1000, 'e2'],
      [3000, 'e3'],
      [7000, 'e4'],
      [119_999, 'e5'],
      [120_000, 'e6'],
    ])
    expect(states.map((s) => s.phase)).to.deep.equal(['down', 'down', 'down', 'down', 'down', 'given-up'])
    expect(states.slice(0, 4).map((s) => retryDelayMs(s, policy))).to.deep.equal([1000, 2000, 4000, 8000])
    expect(retryDelayMs(states[4], policy)).to.equal(16_000)
    expect(states[5]).to.include({failures: 6, lastError: 'e6', since: 0})
    expect(retryDelayMs(states[5], policy), 'no restart once given up').to.equal(undefined)
  })

  it('a source that flaps (back for less than stableMs each time) keeps counting towards giving up', () => {
    const states = run([
      [0, 'lost'],
      [1000, 'up'],
      [50_000, 'lost again'],
      [51_000, 'up'],
      [100_000, 'lost once more'],
      [101_000, 'up'],
      [120_500, 'and again'],
    ])
    expect(states.map((s) => s.phase)).to.deep.equal(['down', 'up', 'down', 'up', 'down', 'up', 'given-up'])
    expect(states[6]).to.include({failures: 4, since: 0})
    expect(states[2]).to.include({downSince: 50_000, failures: 2, since: 0})
    expect(retryDelayMs(states[2], policy), 'the back-off goes on from the run').to.equal(2000)
  })

  it('a source that stayed up for stableMs starts a new run on its next failure', () => {
    const states = run([
      [0, 'lost'],
      [1000, 'up'],
      [61_000, 'lost again'],
      [179_000, 'still'],
      [181_000, 'still'],
    ])
    expect(states[2]).to.include({failures: 1, phase: 'down', since: 61_000})
    expect(states.map((s) => s.phase)).to.deep.equal(['down', 'up', 'down', 'down', 'given-up'])
  })

  it('never gives up without giveUpAfterMs (sources that reconnect by themselves)', () => {
    const follow = {...policy, giveUpAfterMs: undefined}
    const state = run(
      [
        [0, 'connection refused'],
        [10_000_000, 'connection refused'],
      ],
      follow,
    ).at(-1)!
    expect(state).to.include({failures: 2, phase: 'down'})
  })

  it('given up and stopped are final', () => {
    const givenUp = run([
      [0, 'a'],
      [200_000, 'b'],
    ]).at(-1)!
    expect(givenUp.phase).to.equal('given-up')
    expect(sourceUp(givenUp, 200_001)).to.equal(givenUp)
    const stopped: SourceState = {phase: 'stopped'}
    expect(sourceFailed(stopped, 'x', 1, policy)).to.equal(stopped)
    expect(sourceUp(stopped, 1)).to.equal(stopped)
  })

  it('says which source, since when, how often and the last error', () => {
    const [, down] = run([
      [0, 'a'],
      [4000, 'cannot bind the netlink uevent socket: EPERM'],
    ])
    expect(describeSource('uevents', down, 12_000)).to.equal('uevents: down for 12 s (2 failures in 12 s): cannot bind the netlink uevent socket: EPERM')
    expect(describeSource('uevents', startingSource, 0)).to.equal('uevents: starting')
    expect(describeSource('uevents', sourceUp(startingSource, 0), 9)).to.equal(undefined)
  })
})
