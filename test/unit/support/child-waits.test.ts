import {expect} from 'chai'

import {CliProcess} from '../../../harness/process/cli-process.js'
import {waitFor} from '../../../harness/process/wait.js'
import {GcProcess} from '../../support/gc-process.js'
import {startedEarly} from '../../support/started-early.js'
import {rejection} from '../../support/thrown.js'

/** A node one-liner in place of the CLI (`node -e <script>`). */
function child(script: string): CliProcess {
  return new CliProcess([script], '-e')
}

describe('waiting on a child process gives up as soon as the child exits', function () {
  this.timeout(30_000)
  // gc run from the sources takes seconds to start and fail. Started as the file loads, it has usually failed by
  // the time its test waits on it: the wait must give up at once just the same (the node one-liners below check
  // a child that exits during the wait).
  const failingGcRun = startedEarly(() => GcProcess.start(['--kubeconfig', '/nonexistent/kubeconfig']))

  it('waitForLine rejects at once when the child exits, with its exit code and stderr', async () => {
    const proc = child('console.error("cannot find module /x/dist/index.js"); process.exit(3)')
    const t0 = performance.now()
    const error = await rejection(proc.waitForLine('a line that never comes', () => false, 20_000))
    expect(performance.now() - t0, 'ms until the rejection').to.be.lessThan(5000)
    expect(error.message).to.match(/^gave up waiting for a line that never comes: nfdctl .* exited \(code 3\) first/)
    expect(error.message).to.include('stderr:\ncannot find module /x/dist/index.js')
  })

  it('still finds a line the child printed right before it exited', async () => {
    const proc = child('console.log(JSON.stringify({ready: true})); process.exit(0)')
    const {value} = await proc.waitForLine<{ready: boolean}>('the ready line', (v) => v.ready)
    expect(value).to.deep.equal({ready: true})
    expect(await proc.ended).to.deep.equal({code: 0, signal: null})
  })

  it('names the signal when the child was killed', async () => {
    const proc = child('setInterval(() => {}, 1000)')
    const waiting = rejection(proc.waitForLine('anything', () => false, 20_000))
    await proc.stop('SIGKILL')
    expect((await waiting).message).to.match(/exited \(SIGKILL\) first/)
  })

  it('GcProcess.waitForLog rejects at once when gc run exits, with its one-line error', async () => {
    const gc = await failingGcRun
    const t0 = performance.now()
    const error = await rejection(gc.waitForLog('the node cache synced', (l) => l.msg === 'node cache synced', 60_000))
    expect(performance.now() - t0, 'ms until the rejection').to.be.lessThan(20_000)
    expect(error.message).to.match(/exited \(code 2\) first/)
    expect(error.message).to.include('/nonexistent/kubeconfig')
    expect((await gc.ended).code).to.equal(2)
  })

  it('waitFor makes one last probe when giveUpOn settles, then rejects with its reason', async () => {
    let ready = false
    const giveUp = Promise.resolve(new Error('the process exited'))
    expect(
      await waitFor('ready', async () => ready || undefined, {
        giveUpOn: giveUp.then((e) => {
          ready = true
          return e
        }),
      }),
    ).to.equal(true)
    const t0 = performance.now()
    const error = await rejection(waitFor('never', async () => undefined, {giveUpOn: giveUp, intervalMs: 1000, timeoutMs: 60_000}))
    expect(error.message).to.equal('gave up waiting for never: the process exited')
    expect(performance.now() - t0).to.be.lessThan(500)
  })
})
