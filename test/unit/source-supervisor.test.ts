import {expect} from 'chai'
import {mkdtemp, rm} from 'node:fs/promises'
import {connect, createServer, type Server} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {SourceFailedError, SourceSupervisor} from '../../src/lib/source-supervisor.js'
import {waitFor} from '../../harness/process/wait.js'

/** A real source: a connection to a unix socket, which fails while nothing listens there. */
const connectTo = (path: string) => (): Promise<void> =>
  new Promise((resolve, reject) => {
    const socket = connect(path)
    socket.once('connect', () => {
      socket.destroy()
      resolve()
    })
    socket.once('error', reject)
  })

const fast = {backoff: {baseMs: 5, maxMs: 20}, giveUpAfterMs: 1000, stableMs: 1000}
/** Restarts come every 5-20 ms: looked for as often. */
const poll = {intervalMs: 5}

describe('SourceSupervisor', () => {
  let dir: string
  let server: Server | undefined
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-supervisor-'))
  })
  after(async () => {
    server?.close()
    await rm(dir, {force: true, recursive: true})
  })

  it('restarts a failed source with back-off until it works, and /readyz names it meanwhile', async () => {
    const path = join(dir, 'late.sock')
    let clock = 0
    const supervisor = new SourceSupervisor({now: () => clock})
    const report = supervisor.restartable('late socket', connectTo(path), {...fast, giveUpAfterMs: 60_000})
    report.up()
    expect(supervisor.status()).to.deep.equal({ready: true, reason: 'up: late socket'})
    clock = 3000
    report.failed(new Error('socket closed'))
    clock = 5000
    const {ready, reason} = supervisor.status()
    expect(ready).to.equal(false)
    expect(reason).to.equal('late socket: down for 2 s (1 failure in 2 s): socket closed')
    await waitFor('a few restarts failed', async () => (supervisor.state('late socket') as {failures?: number}).failures! >= 3, poll)
    expect(supervisor.status().reason).to.match(/^late socket: down for 2 s \(\d+ failures in 2 s\): connect ENOENT/)
    server = createServer()
    await new Promise<void>((resolve) => server!.listen(path, resolve))
    await waitFor('the source back', async () => supervisor.status().ready, poll)
    expect(supervisor.fatal.aborted).to.equal(false)
    supervisor.stop()
    supervisor.stop()
  })

  it('gives up on a source that cannot come back: fatal aborts with the source and its last error', async () => {
    let clock = 0
    const supervisor = new SourceSupervisor({now: () => clock})
    supervisor.restartable('uevents', connectTo(join(dir, 'never.sock')), fast).failed(new Error('netlink socket failed'))
    await waitFor('one restart failed', async () => (supervisor.state('uevents') as {failures?: number}).failures! >= 2, poll)
    expect(supervisor.fatal.aborted).to.equal(false)
    clock = 1000 // the run of failures now lasts giveUpAfterMs: the next failed restart is the last
    await waitFor('given up', async () => supervisor.fatal.aborted, poll)
    const reason = supervisor.fatal.reason as SourceFailedError
    expect(reason).to.be.instanceOf(SourceFailedError)
    expect(reason.exitCode).to.equal(1)
    expect(reason.source).to.equal('uevents')
    expect(reason.message).to.match(/^uevents cannot come back: \d+ failures in 1 s, the last: connect ENOENT .*never\.sock$/)
    expect(supervisor.status().reason).to.match(/^uevents: given up after/)
    supervisor.stop()
  })

  it('a followed source is shown but never restarted nor given up on', () => {
    let clock = 0
    const supervisor = new SourceSupervisor({now: () => clock})
    const containerd = supervisor.followed('containerd')
    expect(supervisor.status()).to.deep.equal({ready: false, reason: 'containerd: starting'})
    containerd.up()
    clock = 10_000_000
    containerd.failed('connect ECONNREFUSED')
    clock = 20_000_000
    containerd.failed('connect ECONNREFUSED')
    expect(supervisor.fatal.aborted).to.equal(false)
    expect(supervisor.status().reason).to.equal('containerd: down for 10000 s (2 failures in 10000 s): connect ECONNREFUSED')
    containerd.up()
    expect(supervisor.status().ready).to.equal(true)
  })

  it('ignores what sources say once stopped', () => {
    const supervisor = new SourceSupervisor()
    const report = supervisor.restartable('x', () => Promise.reject(new Error('no')), fast)
    supervisor.stop()
    report.failed('late error')
    expect(supervisor.state('x')).to.deep.equal({phase: 'stopped'})
    expect(() => supervisor.followed('x')).to.throw('source x is supervised already')
  })
})
