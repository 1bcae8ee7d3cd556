import {expect} from 'chai'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'

import {Credentials} from '../../../src/lib/kube/credentials.js'
import {KubeClient} from '../../../src/lib/kube/kube-client.js'
import type {ResolvedKubeConfig} from '../../../src/lib/kube/kubeconfig-resolver.js'

// A real HTTP server on loopback records what the client sends (no mocks of our own code).
describe('KubeClient against a recording HTTP server', () => {
  let server: Server
  let base: string
  const seen: Array<{method: string; url: string; auth?: string}> = []
  let answers: Array<{status: number; body: string; headers?: Record<string, string>}> = []

  before(async () => {
    server = createServer((req, res) => {
      seen.push({auth: req.headers.authorization, method: req.method!, url: req.url!})
      const answer = answers.shift() ?? {body: '{"kind":"Status","items":[]}', status: 200}
      res.writeHead(answer.status, {'Content-Type': 'application/json', ...answer.headers}).end(answer.body)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  beforeEach(() => {
    seen.length = 0
    answers = []
  })

  async function client(server: string): Promise<KubeClient> {
    const resolved: ResolvedKubeConfig = {cluster: {server}, contexts: [], origin: 'test', server, user: {token: 't0ken'}}
    return new KubeClient(server, await Credentials.load(resolved), {burst: 10, qps: 100, retry: {baseDelayMs: 1, maxDelayMs: 5, maxRetries: 2}})
  }

  it('keeps a path prefix of the server URL (Rancher, API proxies)', async () => {
    const c = await client(`${base}/k8s/clusters/c-m-abcd/`)
    await c.request('GET', '/api/v1/nodes', {query: {labelSelector: 'a in (b,c)', limit: 5}})
    c.close()
    expect(seen[0].url).to.equal('/k8s/clusters/c-m-abcd/api/v1/nodes?labelSelector=a+in+%28b%2Cc%29&limit=5')
    expect(seen[0].auth).to.equal('Bearer t0ken')
  })

  it('retries a 503 and a 429 with Retry-After, then succeeds', async () => {
    answers = [
      {body: '{}', status: 503},
      {body: '{}', headers: {'Retry-After': '0'}, status: 429},
      {body: '{"ok":true}', status: 200},
    ]
    const c = await client(base)
    const body = await c.request<{ok: boolean}>('GET', '/api/v1/nodes')
    c.close()
    expect(body.ok).to.equal(true)
    expect(seen).to.have.length(3)
    expect(c.stats).to.deep.include({requests: 3, retries: 2})
  })

  it('does not retry a 404 and names the request in the error', async () => {
    answers = [{body: '{"kind":"Status","reason":"NotFound","message":"nodes \\"x\\" not found"}', status: 404}]
    const c = await client(base)
    const error = await c.request('GET', '/api/v1/nodes/x').then(
      () => undefined,
      (e: Error) => e,
    )
    c.close()
    expect(error?.message).to.equal('GET /api/v1/nodes/x: 404 NotFound: nodes "x" not found')
    expect(seen).to.have.length(1)
  })
})
