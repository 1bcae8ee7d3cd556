import {readFile} from 'node:fs/promises'
import type * as http from 'node:http'

import {ConfigError, errorMessage} from '../errors.js'
import {createHttpAgent} from './http-agent.js'
import {nodeHttp, nodeHttps} from '../node-http.js'
import {proxyFromEnvironment} from './proxy.js'

// auth-provider: oidc, as client-go's plugin/pkg/client/auth/oidc: the id-token is used while it is valid
// for 10 more seconds; then the refresh-token is traded at the issuer's token endpoint (found through
// <issuer>/.well-known/openid-configuration) for a new id-token (and maybe a new refresh-token).

/** client-go's expiryDelta. */
const expiryMarginMs = 10_000

/** The id-token's `exp` in ms; a ConfigError for a token that is not a JWT with an exp claim. */
export function idTokenExpiryMs(idToken: string, where: string): number {
  const parts = idToken.split('.')
  if (parts.length !== 3) throw new ConfigError(`${where}: the oidc id-token is not a valid JWT; log in again to get a new one`)
  let exp: unknown
  try {
    exp = (JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as {exp?: unknown}).exp
  } catch (error) {
    throw new ConfigError(`${where}: the claims of the oidc id-token cannot be parsed; log in again to get a new one`, {cause: error})
  }
  if (typeof exp !== 'number') throw new ConfigError(`${where}: the oidc id-token has no exp claim; log in again to get a new one`)
  return exp * 1000
}

/** How long the token may still be sent: until 10 s before its expiry; undefined when that has passed. */
export function usableUntil(idToken: string | undefined, now: number, where: string): number | undefined {
  if (!idToken) return undefined
  const until = idTokenExpiryMs(idToken, where) - expiryMarginMs
  return now < until ? until : undefined
}

export interface RefreshedTokens {
  readonly idToken: string
  /** Only when the issuer handed out a different one. */
  readonly refreshToken?: string
}

/** Trades the refresh-token for new tokens; throws plain Errors (the caller words the fix). */
export async function refreshOidcTokens(config: Readonly<Record<string, string>>, env: NodeJS.ProcessEnv): Promise<RefreshedTokens> {
  const refreshToken = config['refresh-token']
  if (!refreshToken) throw new Error('there is no refresh-token')
  const issuer = config['idp-issuer-url']
  const ca = config['idp-certificate-authority-data']
    ? Buffer.from(config['idp-certificate-authority-data'], 'base64')
    : config['idp-certificate-authority']
      ? await readFile(config['idp-certificate-authority'])
      : undefined
  const send = async (url: URL, body?: string, headers: Record<string, string> = {}): Promise<{status: number; type: string; text: string}> => {
    const agent = await createHttpAgent(url, {ca}, {maxSockets: 1, proxy: proxyFromEnvironment(url, env)})
    try {
      return await exchange(url, agent, body, headers)
    } finally {
      agent.destroy()
    }
  }

  const wellKnown = new URL(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`)
  const discovery = await send(wellKnown)
  if (discovery.status !== 200) throw new Error(`${wellKnown.href} answered ${discovery.status}: ${discovery.text.slice(0, 80)}`)
  const tokenEndpoint = (JSON.parse(discovery.text) as {token_endpoint?: unknown}).token_endpoint
  if (typeof tokenEndpoint !== 'string' || tokenEndpoint === '') throw new Error(`${wellKnown.href} names no token_endpoint`)

  // oauth2's AuthStyleAutoDetect: client credentials in a Basic header first, then in the form.
  const form = {grant_type: 'refresh_token', refresh_token: refreshToken}
  const clientId = config['client-id']
  const clientSecret = config['client-secret'] ?? ''
  const basic = Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')
  const formHeaders = {'Content-Type': 'application/x-www-form-urlencoded'}
  let answer = await send(new URL(tokenEndpoint), new URLSearchParams(form).toString(), {...formHeaders, Authorization: `Basic ${basic}`})
  if (answer.status === 400 || answer.status === 401) {
    const inForm = {...form, client_id: clientId, ...(clientSecret ? {client_secret: clientSecret} : {})}
    answer = await send(new URL(tokenEndpoint), new URLSearchParams(inForm).toString(), formHeaders)
  }
  if (answer.status < 200 || answer.status >= 300) throw new Error(`the token endpoint ${tokenEndpoint} answered ${answer.status}: ${answer.text.slice(0, 200)}`)
  const fields: Record<string, unknown> = answer.type.includes('json') ? (JSON.parse(answer.text) as Record<string, unknown>) : Object.fromEntries(new URLSearchParams(answer.text))
  const idToken = fields.id_token
  if (typeof idToken !== 'string' || idToken === '') {
    throw new Error('the token response has no id_token (was the "openid" scope requested at login? does the provider refresh id_tokens?)')
  }
  const newRefresh = typeof fields.refresh_token === 'string' && fields.refresh_token !== '' && fields.refresh_token !== refreshToken ? fields.refresh_token : undefined
  return {idToken, refreshToken: newRefresh}
}

async function exchange(url: URL, agent: http.Agent, body: string | undefined, headers: Record<string, string>): Promise<{status: number; type: string; text: string}> {
  const transport = url.protocol === 'https:' ? nodeHttps : nodeHttp
  return new Promise((resolve, reject) => {
    const req = transport.request(url, {agent, headers: {Accept: 'application/json', ...headers}, method: body === undefined ? 'GET' : 'POST', signal: AbortSignal.timeout(30_000)}, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), type: res.headers['content-type'] ?? ''}))
      res.on('error', reject)
    })
    req.on('error', (error) => reject(new Error(`${url.origin}: ${errorMessage(error)}`, {cause: error})))
    req.end(body)
  })
}
