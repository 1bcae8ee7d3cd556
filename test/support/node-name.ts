import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {hostname, tmpdir} from 'node:os'
import {join} from 'node:path'

// What a test needs to see which node a device command takes itself to be: --node-name, then $NODE_NAME, then
// the hostname.

/**
 * A loopback API server with no DeviceClasses and no Nodes, and a kubeconfig for it. It records the name of
 * every Node read.
 */
export class NodeRecordingServer {
  readonly nodesRead: string[] = []
  readonly #server: Server
  readonly #dir: string

  private constructor(server: Server, dir: string) {
    this.#server = server
    this.#dir = dir
  }

  static async start(): Promise<NodeRecordingServer> {
    const dir = mkdtempSync(join(tmpdir(), 'nfdctl-node-recording-'))
    const server = createServer()
    const recording = new NodeRecordingServer(server, dir)
    server.on('request', (req, res) => {
      const node = /^\/api\/v1\/nodes\/([^/?]+)/.exec(req.url ?? '')?.[1]
      if (node === undefined) {
        res.writeHead(200, {'Content-Type': 'application/json'}).end('{"kind":"DeviceClassList","items":[]}')
        return
      }
      recording.nodesRead.push(decodeURIComponent(node))
      res.writeHead(404, {'Content-Type': 'application/json'}).end(JSON.stringify({apiVersion: 'v1', code: 404, kind: 'Status', reason: 'NotFound', status: 'Failure'}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    writeFileSync(
      recording.kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        clusters: [{cluster: {server: url}, name: 'c'}],
        contexts: [{context: {cluster: 'c', user: 'u'}, name: 'x'}],
        'current-context': 'x',
        kind: 'Config',
        users: [{name: 'u', user: {token: 't0ken'}}],
      }),
    )
    return recording
  }

  get kubeconfig(): string {
    return join(this.#dir, 'kubeconfig')
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
    rmSync(this.#dir, {force: true, recursive: true})
  }
}

/** Each way to name the node: its title, the command-line arguments, $NODE_NAME (undefined: unset) and the name the command uses. */
export const nodeNameSources: ReadonlyArray<readonly [title: string, args: string[], env: string | undefined, expected: string]> = [
  ['--node-name over $NODE_NAME', ['--node-name', 'flagged'], 'from-env', 'flagged'],
  ['$NODE_NAME without --node-name', [], 'from-env', 'from-env'],
  ['the hostname without either', [], undefined, hostname()],
  ['the hostname when $NODE_NAME is empty', [], '', hostname()],
]

/** Sets $NODE_NAME, or unsets it for undefined. */
export function setNodeName(value: string | undefined): void {
  if (value === undefined) delete process.env.NODE_NAME
  else process.env.NODE_NAME = value
}

/**
 * For a describe block: a NodeRecordingServer for its tests (its record emptied before each) and $NODE_NAME
 * put back after each. Returns the server, once `before` has started it.
 */
export function useNodeRecordingServer(): () => NodeRecordingServer {
  let server: NodeRecordingServer | undefined
  const savedNodeName = process.env.NODE_NAME
  before(async () => {
    server = await NodeRecordingServer.start()
  })
  after(() => server?.stop())
  beforeEach(() => {
    if (server !== undefined) server.nodesRead.length = 0
  })
  afterEach(() => setNodeName(savedNodeName))
  return () => {
    if (server === undefined) throw new Error('the node-recording server is started in before()')
    return server
  }
}
