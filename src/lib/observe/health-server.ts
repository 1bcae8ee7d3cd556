import type {Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import type {Registry} from 'prom-client'

import {ConfigError} from '../errors.js'
import {nodeHttp} from '../node-http.js'

export interface HealthServerOptions {
  readonly port: number
  /** Absent: every address. */
  readonly host?: string
  readonly registry: Registry
  /** /readyz answers 200 while this returns ready, else 503 with the reason. */
  readonly readiness: () => {ready: boolean; reason: string}
}

/** /metrics (Prometheus text), /healthz (the process answers) and /readyz (the component is doing its job). */
export class HealthServer {
  #server?: Server

  constructor(readonly options: HealthServerOptions) {}

  /** The bound port (useful with port 0). */
  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0
  }

  async start(): Promise<void> {
    const server = nodeHttp.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, {Allow: 'GET, HEAD'}).end()
      } else if (path === '/metrics') {
        this.options.registry.metrics().then(
          (text) => res.writeHead(200, {'Content-Type': this.options.registry.contentType}).end(text),
          (error: unknown) => res.writeHead(500).end(String(error)),
        )
      } else if (path === '/healthz' || path === '/livez') {
        res.writeHead(200, {'Content-Type': 'text/plain'}).end('ok\n')
      } else if (path === '/readyz') {
        const {ready, reason} = this.options.readiness()
        res.writeHead(ready ? 200 : 503, {'Content-Type': 'text/plain'}).end(`${reason}\n`)
      } else {
        res.writeHead(404, {'Content-Type': 'text/plain'}).end('not found: try /metrics, /healthz or /readyz\n')
      }
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        const address = `${this.options.host?.includes(':') ? `[${this.options.host}]` : (this.options.host ?? '')}:${this.options.port}`
        const message = `cannot serve /metrics, /healthz and /readyz on ${address}: ${error.message}`
        // An address this host does not have is a configuration mistake; a port in use may be a passing one.
        reject(
          error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND'
            ? new ConfigError(`${message}; give one of this host's addresses with --metrics-bind-address`, {cause: error})
            : new Error(message, {cause: error}),
        )
      })
      server.listen(this.options.port, this.options.host, () => resolve())
    })
    this.#server = server
  }

  /** Closes the listener and open connections. Idempotent. */
  async stop(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
