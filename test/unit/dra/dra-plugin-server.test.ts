import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {DraPluginServer, type DraHandlers} from '../../../src/lib/dra/dra-plugin-server.js'
import {recordingLogger} from '../../support/recording-logger.js'

const handlers: DraHandlers = {
  health: () => ({devices: []}),
  prepare: async () => ({claims: {}}),
  registered: () => {},
  unprepare: async () => ({claims: {}}),
}

/** Whether something accepts connections on the unix socket. */
const accepts = (socket: string): Promise<boolean> =>
  new Promise((resolve) => {
    const client = connect(socket)
    client.once('connect', () => {
      client.destroy()
      resolve(true)
    })
    client.once('error', () => resolve(false))
  })

describe('DraPluginServer', function () {
  let dir: string

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-dra-server-'))
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('serves both sockets, says so while they are its own, and removes them when closed', async function () {
    const server = new DraPluginServer({handlers, logger: recordingLogger(), pluginDir: join(dir, 'plugin'), registrationDir: join(dir, 'registry')})
    await server.serve()
    expect(await server.isServing()).to.equal(true)
    expect(await accepts(server.registrationSocket)).to.equal(true)
    await rm(server.serviceSocket)
    expect(await server.isServing()).to.equal(false)
    await server.close()
    expect(await accepts(server.registrationSocket)).to.equal(false)
  })

  it('shuts the service socket down again when the registration socket cannot be bound, and is not serving', async function () {
    const server = new DraPluginServer({handlers, logger: recordingLogger(), pluginDir: join(dir, 'plugin'), registrationDir: join(dir, 'registry')})
    // A non-empty directory where the registration socket goes: removing it before binding fails.
    await mkdir(server.registrationSocket, {recursive: true})
    await writeFile(join(server.registrationSocket, 'kept'), '')
    const failed = await server.serve().then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(failed).to.be.instanceOf(Error)
    expect(await server.isServing()).to.equal(false)
    expect(await accepts(server.serviceSocket)).to.equal(true)
    await server.close()
    expect(await accepts(server.serviceSocket)).to.equal(false)
  })
})
