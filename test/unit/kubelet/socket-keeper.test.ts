import {expect} from 'chai'
import {mkdtemp, rm, stat} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {SocketKeeper, type KeeperRestarts, type KeeperState, type SocketKeeperOptions} from '../../../src/lib/kubelet/socket-keeper.js'
import {SourceFailedError, SourceSupervisor} from '../../../src/lib/source-supervisor.js'
import {waitFor} from '../../../harness/process/wait.js'
import {FakeKubelet} from '../../support/fake-kubelet.js'
import {recordingLogger} from '../../support/recording-logger.js'
import {rejection} from '../../support/thrown.js'
import {UnixSocketServer} from '../../support/unix-socket-server.js'

describe('SocketKeeper', function () {
  let dir: string
  let kubelet: FakeKubelet
  let server: UnixSocketServer
  const keepers: SocketKeeper[] = []
  const supervisors: SourceSupervisor[] = []

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-keeper-'))
    kubelet = new FakeKubelet(dir)
    server = new UnixSocketServer(join(dir, 'plugin.sock'))
  })

  afterEach(async function () {
    for (const keeper of keepers.splice(0)) await keeper.close()
    for (const supervisor of supervisors.splice(0)) supervisor.stop()
    await kubelet.stop()
    await rm(dir, {force: true, recursive: true})
  })

  /** Restarts as the device plugins have them: a supervisor that never gives up, the shortest wait after a success. */
  function neverGivingUp(supervisor = new SourceSupervisor()): KeeperRestarts {
    supervisors.push(supervisor)
    return {name: 'device plugin test', policy: {backoff: {baseMs: 20, maxMs: 80}, stableMs: 0}, supervisor}
  }

  /** A keeper of `server` over `dir`, its states recorded; restarts that never give up unless told otherwise. */
  function keep(options: Partial<SocketKeeperOptions> = {}): {keeper: SocketKeeper; states: KeeperState[]; gone: number[]} {
    const states: KeeperState[] = []
    const gone: number[] = []
    const keeper = new SocketKeeper({
      logger: recordingLogger(),
      onGone: () => void gone.push(performance.now()),
      onState: (state) => void states.push(state),
      registrar: kubelet,
      restarts: neverGivingUp(),
      socket: server,
      watch: [dir],
      ...options,
    })
    keepers.push(keeper)
    return {gone, keeper, states}
  }

  it('serves, then registers; a deleted socket is served again and registered again', async function () {
    await kubelet.start()
    const {gone, keeper, states} = keep()
    await keeper.start()
    expect(keeper.state).to.equal('registered')
    expect([server.serves, kubelet.registrations.length]).to.deep.equal([1, 1])
    expect(await server.isServing()).to.equal(true)

    await rm(server.path)
    await waitFor('served and registered again', async () => kubelet.registrations.length === 2 && (await server.isServing()), {intervalMs: 10, timeoutMs: 5000})
    expect(server.serves).to.equal(2)
    expect(gone).to.have.length(1)
    expect(states).to.deep.equal(['registered', 'serving', 'registered'])
  })

  it('a kubelet restart (a new kubelet.sock) is registered with again, the socket kept as it is', async function () {
    await kubelet.start()
    const {keeper} = keep()
    await keeper.start()
    await kubelet.start()
    await waitFor('registered with the new kubelet', async () => kubelet.registrations.length === 2, {intervalMs: 10, timeoutMs: 5000})
    expect(server.serves).to.equal(1)
    expect(keeper.state).to.equal('registered')
  })

  it('without kubelet: says so once, asks again with a back-off that grows to its cap, and registers once kubelet comes', async function () {
    const {keeper, states} = keep()
    await keeper.start()
    expect(keeper.state).to.equal('kubelet absent')
    await waitFor('six attempts', async () => kubelet.asked.length >= 6, {intervalMs: 10, timeoutMs: 5000})
    const gaps = kubelet.asked.slice(1).map((at, i) => at - kubelet.asked[i])
    // 20, 40, 80, 80 ms after the first failures (the first gap may be our own socket's directory event).
    expect(gaps.at(-1), `gaps ${gaps.map((g) => g.toFixed(0)).join(', ')} ms`).to.be.at.least(70)
    expect(gaps.slice(-3).every((gap) => gap >= 30)).to.equal(true)
    await kubelet.start()
    await waitFor('registered', async () => keeper.state === 'registered', {intervalMs: 10, timeoutMs: 5000})
    expect(states).to.deep.equal(['kubelet absent', 'registered'])
    expect(server.serves).to.equal(1)
  })

  it('a refused registration is retried until kubelet accepts it', async function () {
    await kubelet.start()
    kubelet.refuseWith = new Error('kubelet says no')
    const {keeper, states} = keep()
    await keeper.start()
    expect(keeper.state).to.equal('register failed')
    await waitFor('two more attempts', async () => kubelet.asked.length >= 3, {intervalMs: 10, timeoutMs: 5000})
    kubelet.refuseWith = undefined
    await waitFor('registered', async () => keeper.state === 'registered', {intervalMs: 10, timeoutMs: 5000})
    expect(states).to.deep.equal(['register failed', 'registered'])
  })

  it("with the supervisor: a socket that cannot be served is retried and named on /readyz, then given up on: the supervisor's fatal signal aborts", async function () {
    const supervisor = new SourceSupervisor()
    supervisors.push(supervisor)
    server.failWith = new Error('EEXIST: the plugin directory is a file')
    const {keeper, states} = keep({registrar: undefined, restarts: {name: 'test sockets', policy: {backoff: {baseMs: 10, maxMs: 20}, giveUpAfterMs: 200, stableMs: 1000}, supervisor}})
    await keeper.start()
    expect(states).to.deep.equal(['register failed'])
    expect(supervisor.status()).to.deep.include({ready: false})
    expect(supervisor.status().reason).to.match(/^test sockets: down for \d+ s \(1 failure in \d+ s\): EEXIST: the plugin directory is a file$/)
    await waitFor('given up', async () => supervisor.fatal.aborted, {intervalMs: 10, timeoutMs: 5000})
    const reason = supervisor.fatal.reason as SourceFailedError
    expect(reason).to.be.instanceOf(SourceFailedError)
    expect(reason.message).to.match(/^test sockets cannot come back: \d+ failures in 0 s, the last: EEXIST: the plugin directory is a file$/)
    expect(server.serves).to.be.at.least(3)
  })

  it('with the supervisor: served again after a failure, it is up again', async function () {
    const supervisor = new SourceSupervisor()
    supervisors.push(supervisor)
    server.failWith = new Error('ENOTDIR')
    const {keeper} = keep({registrar: undefined, restarts: {name: 'test sockets', policy: {backoff: {baseMs: 10, maxMs: 20}, giveUpAfterMs: 60_000, stableMs: 1000}, supervisor}})
    await keeper.start()
    expect(supervisor.state('test sockets')?.phase).to.equal('down')
    server.failWith = undefined
    await waitFor('up', async () => supervisor.state('test sockets')?.phase === 'up', {intervalMs: 10, timeoutMs: 5000})
    expect(await server.isServing()).to.equal(true)
    expect(supervisor.fatal.aborted).to.equal(false)
  })

  it('closed, it frees its name with the supervisor: a keeper of the same name (a class served again) may start', async function () {
    const supervisor = new SourceSupervisor()
    const restarts = neverGivingUp(supervisor)
    const {keeper} = keep({restarts})
    await keeper.start()
    expect(supervisor.state(restarts.name)?.phase).to.equal('down')
    await keeper.close()
    expect(supervisor.state(restarts.name)).to.equal(undefined)
    const again = keep({restarts, socket: new UnixSocketServer(join(dir, 'again.sock'))})
    await kubelet.start()
    await again.keeper.start()
    expect(again.keeper.state).to.equal('registered')
  })

  it('keepNow() rejects when the socket cannot be served, and nothing retries it', async function () {
    server.failWith = new Error('EACCES')
    const {keeper} = keep({registrar: undefined})
    expect((await rejection(keeper.keepNow())).message).to.equal('EACCES')
    await sleep(100)
    expect(server.serves).to.equal(1)
  })

  it('close() removes the socket, ends retries and watching, and may be called twice', async function () {
    const {keeper} = keep()
    await keeper.start()
    expect(keeper.state).to.equal('kubelet absent')
    await keeper.close()
    await keeper.close()
    const asked = kubelet.asked.length
    expect(await stat(server.path).catch(() => undefined)).to.equal(undefined)
    await kubelet.start()
    await sleep(150)
    expect(kubelet.asked.length).to.equal(asked)
    expect(server.serves).to.equal(1)
  })
})
