import {expect} from 'chai'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {hostname, tmpdir} from 'node:os'
import {join} from 'node:path'

import {nfdctl} from '../../support/run-cli.js'

// devices list, plugins serve and devices agent name the node alike: --node-name, then $NODE_NAME, then the
// hostname. A loopback API server with no DeviceClasses and no Nodes records which Node each command reads.
describe('the device commands name the node alike', function () {
  let server: Server
  let dir: string
  let kubeconfig: string
  const nodesRead: string[] = []
  const savedNodeName = process.env.NODE_NAME

  before(async () => {
    server = createServer((req, res) => {
      const node = /^\/api\/v1\/nodes\/([^/?]+)/.exec(req.url ?? '')?.[1]
      if (node === undefined) {
        res.writeHead(200, {'Content-Type': 'application/json'}).end('{"kind":"DeviceClassList","items":[]}')
        return
      }
      nodesRead.push(decodeURIComponent(node))
      res.writeHead(404, {'Content-Type': 'application/json'}).end(JSON.stringify({apiVersion: 'v1', code: 404, kind: 'Status', reason: 'NotFound', status: 'Failure'}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    dir = mkdtempSync(join(tmpdir(), 'nfdctl-node-name-'))
    kubeconfig = join(dir, 'kubeconfig')
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        clusters: [{cluster: {server: url}, name: 'c'}],
        contexts: [{context: {cluster: 'c', user: 'u'}, name: 'x'}],
        'current-context': 'x',
        kind: 'Config',
        users: [{name: 'u', user: {token: 't0ken'}}],
      }),
    )
  })

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()))
    rmSync(dir, {force: true, recursive: true})
  })

  beforeEach(() => {
    nodesRead.length = 0
  })

  afterEach(() => {
    if (savedNodeName === undefined) delete process.env.NODE_NAME
    else process.env.NODE_NAME = savedNodeName
  })

  const sources: Array<[string, string[], string | undefined, string]> = [
    ['--node-name over $NODE_NAME', ['--node-name', 'flagged'], 'from-env', 'flagged'],
    ['$NODE_NAME without --node-name', [], 'from-env', 'from-env'],
    ['the hostname without either', [], undefined, hostname()],
    ['the hostname when $NODE_NAME is empty', [], '', hostname()],
  ]
  for (const [name, args, env, expected] of sources) {
    it(`devices list: ${name}`, async function () {
      setNodeName(env)
      const run = await nfdctl(['devices', 'list', '--json', '--kubeconfig', kubeconfig, ...args])
      expect(run.exitCode, run.stdout).to.equal(0)
      expect(nodesRead).to.deep.equal([expected])
      expect(run.stderr).to.contain(`Node ${expected} is not in the cluster`)
    })

    it(`plugins serve: ${name}`, async function () {
      setNodeName(env)
      const run = await nfdctl(['plugins', 'serve', '--kubeconfig', kubeconfig, '--metrics-port', '0', '--log-level', 'error', ...args])
      expect(run.exitCode).to.equal(2)
      expect(nodesRead).to.deep.equal([expected])
      expect(run.error?.message).to.equal(`no DeviceClass applies to node ${expected}: create one (kubectl apply) or give --class-file`)
    })
  }

  it('devices agent: $NODE_NAME without --node-name', async function () {
    setNodeName('Not_A_Node')
    const run = await nfdctl(['devices', 'agent', '--kubeconfig', kubeconfig])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^the node name "Not_A_Node" is not a valid Node name/)
  })

  it('devices agent: --node-name over $NODE_NAME', async function () {
    setNodeName('worker-1')
    const run = await nfdctl(['devices', 'agent', '--kubeconfig', kubeconfig, '--node-name', 'Not_A_Node'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^the node name "Not_A_Node" is not a valid Node name/)
  })
})

function setNodeName(value: string | undefined): void {
  if (value === undefined) delete process.env.NODE_NAME
  else process.env.NODE_NAME = value
}
