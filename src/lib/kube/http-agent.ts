import type * as http from 'node:http'
import type * as https from 'node:https'
import {createSecureContext} from 'node:tls'

import type {AgentConnectOpts} from 'agent-base'

import {nodeHttp, nodeHttps} from '../node-http.js'

/** What a connection to the API server (or an OIDC issuer) proves and checks; from the kubeconfig's cluster and user. */
export interface TlsMaterial {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  rejectUnauthorized?: boolean
  servername?: string
}

export interface HttpAgentOptions {
  /** The proxy to go through (see proxyFor); undefined connects directly. */
  readonly proxy?: URL
  readonly maxSockets: number
}

/**
 * The keep-alive agent for one API server: direct, through an HTTP(S) proxy (CONNECT for https servers,
 * absolute-URI requests for http ones, as Go) or through SOCKS5. The proxy libraries are imported only when
 * a proxy is configured, so a direct `gc run` does not pay for them.
 */
export async function createHttpAgent(server: URL, tls: TlsMaterial, options: HttpAgentOptions): Promise<http.Agent> {
  const {proxy} = options
  if (!proxy) return directHttpAgent(server, tls, options.maxSockets)
  const agent = await proxyAgent(server, proxy, {keepAlive: true, maxSockets: options.maxSockets, ...setOnly(tls)})
  // agent-base guesses its protocol from the call stack; http(s).request checks it, so say it.
  agent.protocol = server.protocol
  return agent
}

/**
 * A direct keep-alive agent. The CA, certificate and key go in one secure context made once, not as agent
 * options: https.Agent turns every one of those into part of a string key for each request (the PEM text,
 * kilobytes per request: a tenth of all a mass cleanup allocated) and tls.connect parses them again for
 * each new connection.
 */
export function directHttpAgent(server: URL, tls: TlsMaterial, maxSockets: number): http.Agent {
  if (server.protocol !== 'https:') return new nodeHttp.Agent({keepAlive: true, maxSockets})
  const {ca, cert, key, rejectUnauthorized, servername} = tls
  return new nodeHttps.Agent({keepAlive: true, maxSockets, secureContext: createSecureContext(setOnly({ca, cert, key})), ...setOnly({rejectUnauthorized, servername})})
}

async function proxyAgent(server: URL, proxy: URL, agentOptions: https.AgentOptions): Promise<http.Agent & {protocol: string}> {
  if (proxy.protocol === 'socks5:' || proxy.protocol === 'socks5h:') {
    const {SocksProxyAgent} = await import('socks-proxy-agent')
    // Go's SOCKS5 dialer hands the host name to the proxy (remote DNS): socks-proxy-agent calls that socks5h.
    const remote = new URL(proxy.href.replace(/^socks5:/, 'socks5h:'))
    return new (withServerTls(SocksProxyAgent, agentOptions))(remote, agentOptions)
  }
  if (server.protocol === 'https:') {
    const {HttpsProxyAgent} = await import('https-proxy-agent')
    return new (withServerTls(HttpsProxyAgent, agentOptions))(proxy, agentOptions)
  }
  const {HttpProxyAgent} = await import('http-proxy-agent')
  return new HttpProxyAgent(proxy, agentOptions)
}

// A mixin base must take any[] (TS2545).
// biome-ignore lint/suspicious/noExplicitAny: TypeScript accepts only any[] for a mixin constructor's parameters
type ConnectingAgent = new (...args: any[]) => http.Agent & {protocol: string; connect(req: http.ClientRequest, opts: AgentConnectOpts): Promise<unknown>}

/**
 * The proxy agents start the API server's TLS from the request's options only (they replace the agent's
 * own), so the cluster's CA, client certificate and server name are added to every connect.
 */
function withServerTls<T extends ConnectingAgent>(Base: T, tls: https.AgentOptions): T {
  return class extends Base {
    override connect(req: http.ClientRequest, opts: AgentConnectOpts): Promise<unknown> {
      return super.connect(req, {...opts, ...pickTls(tls)} as AgentConnectOpts)
    }
  }
}

function pickTls(options: https.AgentOptions): https.AgentOptions {
  const {ca, cert, key, rejectUnauthorized, servername} = options
  return setOnly({ca, cert, key, rejectUnauthorized, servername})
}

/** Only the options that are set, so that spreading them never replaces a value with `undefined`. */
function setOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>
}
