import {readFile} from 'node:fs/promises'

import {ConfigError, errorMessage} from '../errors.js'
import {processIo, runExecPlugin, type ExecIo, type ExecStatus} from './exec-plugin.js'
import type {TlsMaterial} from './http-agent.js'
import {writeAuthProviderConfig} from './kubeconfig-writer.js'
import type {Impersonation} from './kubeconfig-reader.js'
import type {ResolvedKubeConfig} from './kubeconfig-resolver.js'
import {refreshOidcTokens, usableUntil} from './oidc.js'

/** Request headers; Impersonate-Group and Impersonate-Extra-* repeat, one line per value. */
export type AuthHeaders = Record<string, string | string[]>

export interface CredentialsOptions {
  /** Exec plugins' stdin and stderr; default this process's. */
  readonly io?: ExecIo
  /** Where HTTPS_PROXY etc. are read for the OIDC issuer; default process.env. */
  readonly env?: NodeJS.ProcessEnv
}

/** Bearer tokens in files (projected service-account tokens) rotate; re-read them this often. */
const tokenFileTtlMs = 60_000

/**
 * The TLS material and request headers of a kubeconfig user: certificates and keys (files or inline data),
 * static or file tokens, basic auth, exec credential plugins (token cached until it expires), OIDC id-tokens
 * (refreshed when expired) and impersonation.
 */
export class Credentials {
  #cached?: {headers: AuthHeaders; until: number}
  #inFlight?: Promise<AuthHeaders>
  /** The oidc auth-provider config as last read or refreshed. */
  #oidc?: Readonly<Record<string, string>>

  private constructor(
    private readonly config: ResolvedKubeConfig,
    readonly tls: TlsMaterial,
    private readonly options: CredentialsOptions,
  ) {
    this.#oidc = config.user.oidc?.config
  }

  static async load(config: ResolvedKubeConfig, options: CredentialsOptions = {}): Promise<Credentials> {
    const {cluster, user} = config
    const bytes = async (file: string | undefined, data: string | undefined, what: string): Promise<Buffer | undefined> => {
      if (data !== undefined) return Buffer.from(data, 'base64')
      if (file === undefined) return undefined
      try {
        return await readFile(file)
      } catch (error) {
        throw new ConfigError(`${config.origin}: cannot read ${what} ${file}: ${errorMessage(error)}`, {cause: error})
      }
    }
    const tls: TlsMaterial = {
      ca: await bytes(cluster.caFile, cluster.caData, 'certificate authority'),
      cert: await bytes(user.clientCertificate, user.clientCertificateData, 'client certificate'),
      key: await bytes(user.clientKey, user.clientKeyData, 'client key'),
      rejectUnauthorized: cluster.insecureSkipTlsVerify ? false : undefined,
      servername: cluster.tlsServerName,
    }
    const credentials = new Credentials(config, tls, options)
    if (user.exec) {
      // An exec plugin may hand out a client certificate instead of a token; TLS needs it before connecting.
      const status = await credentials.#runExec()
      if (status.clientCertificateData && status.clientKeyData) {
        tls.cert = Buffer.from(status.clientCertificateData)
        tls.key = Buffer.from(status.clientKeyData)
      }
      credentials.#remember(...execHeaders(status)) // the first request uses this run's token while it is valid
    }
    // An expired id-token is refreshed (or refused, with the fix) before anything talks to the API server.
    if (user.oidc) await credentials.headers()
    return credentials
  }

  /** Headers for the next request; `refresh` forces new credentials (after a 401). */
  async headers(refresh = false): Promise<AuthHeaders> {
    if (!refresh && this.#cached && Date.now() < this.#cached.until) return this.#cached.headers
    // Parallel requests share one refresh: an exec plugin runs once, not once per request.
    this.#inFlight ??= this.#fetchHeaders().finally(() => (this.#inFlight = undefined))
    return this.#inFlight
  }

  async #fetchHeaders(): Promise<AuthHeaders> {
    const {user} = this.config
    if (user.exec) return this.#remember(...execHeaders(await this.#runExec()))
    if (user.oidc) return this.#remember(...(await this.#oidcHeaders()))
    const headers: AuthHeaders = {}
    let until = Number.POSITIVE_INFINITY
    if (user.tokenFile) {
      try {
        headers.Authorization = `Bearer ${(await readFile(user.tokenFile, 'utf8')).trim()}`
      } catch (error) {
        throw new ConfigError(`${this.config.origin}: cannot read token file ${user.tokenFile}: ${errorMessage(error)}`, {cause: error})
      }
      until = Date.now() + tokenFileTtlMs
    } else if (user.token) {
      headers.Authorization = `Bearer ${user.token}`
    } else if (user.username !== undefined) {
      headers.Authorization = `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}`
    }
    return this.#remember(headers, until)
  }

  #remember(headers: AuthHeaders, until: number): AuthHeaders {
    Object.assign(headers, impersonationHeaders(this.config.user.impersonate))
    this.#cached = {headers, until}
    return headers
  }

  async #runExec(): Promise<ExecStatus> {
    const {cluster, user} = this.config
    return runExecPlugin(user.exec!, {caData: this.tls.ca, cluster, where: this.config.origin}, this.options.io ?? processIo())
  }

  /** The id-token while it is valid; else refreshed, written back to the user's kubeconfig file, and used. */
  async #oidcHeaders(): Promise<[AuthHeaders, number]> {
    const provider = this.config.user.oidc!
    const where = `${this.config.origin}: user "${provider.userName}"`
    const config = this.#oidc!
    const until = usableUntil(config['id-token'], Date.now(), where)
    if (until !== undefined) return [{Authorization: `Bearer ${config['id-token']}`}, until]
    const fix = `log in to ${config['idp-issuer-url']} again to get a new id-token and refresh-token (or switch the user to an exec credential plugin such as kubelogin)`
    let tokens: Awaited<ReturnType<typeof refreshOidcTokens>>
    try {
      tokens = await refreshOidcTokens(config, this.options.env ?? process.env)
    } catch (error) {
      throw new ConfigError(`${where}: the oidc id-token has expired or is missing, and refreshing it failed: ${errorMessage(error)}; ${fix}`, {cause: error})
    }
    const updated = {'id-token': tokens.idToken, ...(tokens.refreshToken ? {'refresh-token': tokens.refreshToken} : {})}
    await writeAuthProviderConfig(provider.file, provider.userName, updated)
    this.#oidc = {...config, ...updated}
    const refreshedUntil = usableUntil(tokens.idToken, Date.now(), where)
    if (refreshedUntil === undefined) throw new ConfigError(`${where}: the issuer handed out an id-token that has already expired; ${fix}`)
    return [{Authorization: `Bearer ${tokens.idToken}`}, refreshedUntil]
  }
}

/** client-go's impersonating round tripper: Impersonate-User, -Uid, one -Group per group, -Extra-<key> per value. */
function impersonationHeaders(as: Impersonation | undefined): AuthHeaders {
  if (!as) return {}
  const headers: AuthHeaders = {}
  if (as.user !== undefined) headers['Impersonate-User'] = as.user
  if (as.uid !== undefined) headers['Impersonate-Uid'] = as.uid
  if (as.groups.length > 0) headers['Impersonate-Group'] = [...as.groups]
  for (const [key, values] of Object.entries(as.extra)) if (values.length > 0) headers[`Impersonate-Extra-${escapeHeaderKey(key)}`] = [...values]
  return headers
}

/** client-go's headerKeyEscape: bytes outside the header-name token set (and %) become %XX, so keys survive. */
function escapeHeaderKey(key: string): string {
  return [...Buffer.from(key, 'utf8')].map((b) => (/[A-Za-z0-9!#$&'*+\-.^_`|~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('')
}

/** An exec plugin's token as headers, valid until a little before the plugin's expiry. */
function execHeaders(status: ExecStatus): [AuthHeaders, number] {
  const headers: AuthHeaders = status.token ? {Authorization: `Bearer ${status.token}`} : {}
  const until = status.expirationTimestamp ? Date.parse(status.expirationTimestamp) - 10_000 : Number.POSITIVE_INFINITY
  return [headers, until]
}
