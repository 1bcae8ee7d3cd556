import {expect} from 'chai'
import {createServer as createHttpServer, type Server} from 'node:http'
import {connect, createServer as createTcpServer, type AddressInfo, type Socket} from 'node:net'

import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, ensureNamespace, resetCluster, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {adminClient} from '../support/cluster.js'
import {kubeconfigWith} from '../support/kubeconfig.js'
import {nfdctl} from '../support/run-cli.js'
import {rejection} from '../support/thrown.js'

/** Every host a proxy is asked for is the API server on 127.0.0.1 (so "kube.test" needs no DNS). */
function upstream(port: number): {host: string; port: number} {
  return {host: '127.0.0.1', port}
}

/** An HTTP proxy that only tunnels (CONNECT), as corporate proxies do for https; it records each tunnel's target. */
async function startConnectProxy(): Promise<{url: string; tunnels: string[]; close(): Promise<void>}> {
  const tunnels: string[] = []
  const sockets = new Set<Socket>()
  const server: Server = createHttpServer((_req, res) => res.writeHead(405).end('CONNECT only'))
  server.on('connect', (req, client: Socket) => {
    tunnels.push(req.url!)
    const port = Number(new URL(`http://${req.url}`).port)
    const target = connect(upstream(port), () => client.write('HTTP/1.1 200 Connection established\r\n\r\n'))
    sockets.add(client).add(target)
    target.pipe(client).pipe(target)
    const end = (): void => {
      client.destroy()
      target.destroy()
    }
    target.on('error', end).on('close', end)
    client.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
    tunnels,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
  }
}

/** A SOCKS5 proxy (RFC 1928: no authentication, CONNECT only) that records each target as host:port. */
async function startSocks5Proxy(): Promise<{url: string; tunnels: string[]; close(): Promise<void>}> {
  const tunnels: string[] = []
  const sockets = new Set<Socket>()
  const server = createTcpServer((client) => {
    sockets.add(client)
    client.on('error', () => client.destroy())
    client.once('data', (greeting) => {
      if (greeting[0] !== 5) return void client.destroy()
      client.write(Buffer.from([5, 0])) // version 5, no authentication
      client.once('data', (request) => {
        // VER CMD RSV ATYP ADDR PORT; ATYP 1 = IPv4, 3 = domain name, 4 = IPv6
        const atyp = request[3]
        let host: string
        let offset: number
        if (atyp === 1) [host, offset] = [request.subarray(4, 8).join('.'), 8]
        else if (atyp === 3) [host, offset] = [request.subarray(5, 5 + request[4]).toString('latin1'), 5 + request[4]]
        else return void client.end(Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]))
        const port = request.readUInt16BE(offset)
        tunnels.push(`${host}:${port}`)
        const target = connect(upstream(port), () => {
          client.write(Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 0]))
          target.pipe(client).pipe(target)
        })
        sockets.add(target)
        const end = (): void => {
          client.destroy()
          target.destroy()
        }
        target.on('error', end).on('close', end)
        client.on('close', end)
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
    tunnels,
    url: `socks5://127.0.0.1:${(server.address() as AddressInfo).port}`,
  }
}

describe('kubeconfig proxies (proxy-url, HTTPS_PROXY, NO_PROXY) against a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient
  let apiPort: number

  before(async function () {
    ;({client, plane} = await adminClient(this))
    apiPort = Number(new URL(client.server.href).port)
    await ensureNamespace(client, 'nfd')
  })

  beforeEach(async () => {
    await resetCluster(client)
    await seedNodesWithObjects(client, ['live-1'], 'nfd', 2)
    await createNodeFeature(client, 'nfd', 'gone-1', 'gone-1')
  })

  after(() => client?.close())

  /** The admin kubeconfig with `cluster` fields changed. */
  const clusterWith = (name: string, fields: Record<string, unknown>): Promise<string> => kubeconfigWith(plane.kubeconfig, name, (doc) => Object.assign(doc.clusters[0].cluster, fields))

  async function listNodes(kubeconfig: string, env: NodeJS.ProcessEnv): Promise<{names: string[]; origin: string}> {
    const opened = await openCluster({env, kubeconfig}, {burst: 10, qps: 10})
    try {
      const list = await opened.client.request<{items: Array<{metadata: {name: string}}>}>('GET', '/api/v1/nodes')
      return {names: list.items.map((n) => n.metadata.name), origin: opened.origin}
    } finally {
      opened.client.close()
    }
  }

  it('gc once goes through the cluster proxy-url, even to 127.0.0.1 (as client-go), and tunnels TLS end to end', async () => {
    const proxy = await startConnectProxy()
    try {
      const run = await nfdctl<SweepReport>(['gc', 'once', '--dry-run', '--json', '--kubeconfig', await clusterWith('proxy-url', {'proxy-url': proxy.url})])
      expect(run.exitCode, run.stdout + run.stderr + String(run.error)).to.equal(0)
      expect(run.result?.objects.map((o) => o.name)).to.deep.equal(['gone-1'])
      expect(proxy.tunnels.length).to.be.greaterThan(0)
      expect(new Set(proxy.tunnels)).to.deep.equal(new Set([`127.0.0.1:${apiPort}`]))
    } finally {
      await proxy.close()
    }
  })

  it('proxy-url wins over HTTPS_PROXY and NO_PROXY', async () => {
    const proxy = await startConnectProxy()
    try {
      const result = await listNodes(await clusterWith('proxy-url-env', {'proxy-url': proxy.url}), {HTTPS_PROXY: 'http://127.0.0.1:1', NO_PROXY: '*'})
      expect(result.names).to.deep.equal(['live-1'])
      expect(result.origin).to.include(`via proxy ${proxy.url}`)
      expect(proxy.tunnels).to.have.length.greaterThan(0)
    } finally {
      await proxy.close()
    }
  })

  it('HTTPS_PROXY is used for a server that is not loopback (kube.test, resolved by the proxy)', async () => {
    const proxy = await startConnectProxy()
    try {
      // The serving certificate names localhost; tls-server-name checks it under the other host name.
      const kubeconfig = await clusterWith('env-proxy', {server: `https://kube.test:${apiPort}`, 'tls-server-name': 'localhost'})
      const result = await listNodes(kubeconfig, {HTTPS_PROXY: proxy.url})
      expect(result.names).to.deep.equal(['live-1'])
      expect(proxy.tunnels).to.deep.equal([`kube.test:${apiPort}`])
    } finally {
      await proxy.close()
    }
  })

  it('HTTPS_PROXY in the process environment reaches gc once too', async () => {
    const proxy = await startConnectProxy()
    const saved = process.env.HTTPS_PROXY
    process.env.HTTPS_PROXY = proxy.url
    try {
      const kubeconfig = await clusterWith('env-proxy-cli', {server: `https://kube.test:${apiPort}`, 'tls-server-name': 'localhost'})
      const run = await nfdctl<SweepReport>(['gc', 'once', '--dry-run', '--json', '--kubeconfig', kubeconfig])
      expect(run.exitCode, run.stdout + run.stderr + String(run.error)).to.equal(0)
      expect(new Set(proxy.tunnels)).to.deep.equal(new Set([`kube.test:${apiPort}`]))
    } finally {
      if (saved === undefined) delete process.env.HTTPS_PROXY
      else process.env.HTTPS_PROXY = saved
      await proxy.close()
    }
  })

  it('HTTPS_PROXY is never used for loopback servers (127.0.0.1, localhost), as client-go', async () => {
    const proxy = await startConnectProxy()
    try {
      for (const server of [`https://127.0.0.1:${apiPort}`, `https://localhost:${apiPort}`]) {
        const result = await listNodes(await clusterWith('loopback', {server}), {HTTPS_PROXY: proxy.url})
        expect(result.names, server).to.deep.equal(['live-1'])
        expect(result.origin).to.not.include('via proxy')
      }
      expect(proxy.tunnels).to.deep.equal([])
    } finally {
      await proxy.close()
    }
  })

  it('NO_PROXY keeps a matching server away from HTTPS_PROXY (the direct attempt then fails on DNS)', async () => {
    const proxy = await startConnectProxy()
    try {
      const kubeconfig = await clusterWith('no-proxy', {server: `https://kube.test:${apiPort}`, 'tls-server-name': 'localhost'})
      const opened = await openCluster({env: {HTTPS_PROXY: proxy.url, NO_PROXY: 'example.com,.test'}, kubeconfig}, {burst: 10, qps: 10, retry: {baseDelayMs: 1, maxDelayMs: 1, maxRetries: 0}})
      try {
        const error = await rejection(opened.client.request('GET', '/api/v1/nodes'))
        expect(error.message).to.match(/ENOTFOUND|EAI_AGAIN/)
      } finally {
        opened.client.close()
      }
      expect(proxy.tunnels).to.deep.equal([])
    } finally {
      await proxy.close()
    }
  })

  it('a socks5 proxy-url goes through SOCKS5, handing the host name to the proxy (as Go)', async () => {
    const socks = await startSocks5Proxy()
    try {
      const kubeconfig = await clusterWith('socks', {'proxy-url': socks.url, server: `https://kube.test:${apiPort}`, 'tls-server-name': 'localhost'})
      const run = await nfdctl<SweepReport>(['gc', 'once', '--dry-run', '--json', '--kubeconfig', kubeconfig])
      expect(run.exitCode, run.stdout + run.stderr + String(run.error)).to.equal(0)
      expect(run.result?.objects.map((o) => o.name)).to.deep.equal(['gone-1'])
      expect(new Set(socks.tunnels)).to.deep.equal(new Set([`kube.test:${apiPort}`]))
    } finally {
      await socks.close()
    }
  })

  it('refuses a proxy-url scheme kubectl refuses (exit 2, nothing contacted)', async () => {
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', await clusterWith('bad-scheme', {'proxy-url': 'socks4://127.0.0.1:1080'})])
    expect(run.exitCode).to.equal(2)
    expect(String(run.error?.message)).to.include('unsupported scheme "socks4"; use http, https or socks5')
  })
})
