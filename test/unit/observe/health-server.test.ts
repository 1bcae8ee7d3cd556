import {expect} from 'chai'
import {Registry} from 'prom-client'

import {ConfigError} from '../../../src/lib/errors.js'
import {HealthServer} from '../../../src/lib/observe/health-server.js'
import {tcpReachable as reachable} from '../../support/tcp-reachable.js'

describe('HealthServer: the address it listens on (real sockets)', function () {
  const servers: HealthServer[] = []
  const start = async (host?: string, port = 0): Promise<HealthServer> => {
    const server = new HealthServer({host, port, readiness: () => ({ready: true, reason: 'ok'}), registry: new Registry()})
    servers.push(server)
    await server.start()
    return server
  }

  afterEach(async () => {
    for (const server of servers.splice(0)) {
      await server.stop()
      await server.stop()
    }
  })

  it('on 127.0.0.1 answers there and nowhere else (127.0.0.2 is refused)', async function () {
    const server = await start('127.0.0.1')
    expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).to.equal(200)
    expect(await reachable('127.0.0.2', server.port)).to.equal(false)
  })

  it('without a host answers on every address, 127.0.0.2 too', async function () {
    const server = await start()
    expect(await reachable('127.0.0.1', server.port)).to.equal(true)
    expect(await reachable('127.0.0.2', server.port)).to.equal(true)
  })

  it('on ::1 answers over IPv6 loopback only', async function () {
    const server = await start('::1')
    expect((await fetch(`http://[::1]:${server.port}/readyz`)).status).to.equal(200)
    expect(await reachable('127.0.0.1', server.port)).to.equal(false)
  })

  it('refuses an address this host does not have in one line that names the flag (exit 2)', async function () {
    // 192.0.2.0/24 is TEST-NET-1: documentation only, never a local address.
    const error = await start('192.0.2.1', 8080).then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error).to.be.instanceOf(ConfigError)
    expect(error?.message).to.equal(
      "cannot serve /metrics, /healthz and /readyz on 192.0.2.1:8080: listen EADDRNOTAVAIL: address not available 192.0.2.1:8080; give one of this host's addresses with --metrics-bind-address",
    )
    expect((error as ConfigError).exitCode).to.equal(2)
  })

  it('says which address is taken when the port is in use', async function () {
    const first = await start('127.0.0.1')
    const error = await start('127.0.0.1', first.port).then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error?.message).to.match(new RegExp(`^cannot serve /metrics, /healthz and /readyz on 127\\.0\\.0\\.1:${first.port}: listen EADDRINUSE`))
    expect(error).to.not.be.instanceOf(ConfigError)
  })
})
