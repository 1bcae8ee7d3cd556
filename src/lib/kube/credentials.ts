import {execFile} from 'node:child_process'
import {readFile} from 'node:fs/promises'
import {promisify} from 'node:util'

import {ConfigError, errorMessage} from '../errors.js'
import type {ResolvedKubeConfig} from './kubeconfig.js'

export interface TlsMaterial {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  rejectUnauthorized?: boolean
  servername?: string
}

interface ExecCredential {
  status?: {token?: string; expirationTimestamp?: string; clientCertificateData?: string; clientKeyData?: string}
}

/** Bearer tokens in files (projected service-account tokens) rotate; re-read them this often. */
const tokenFileTtlMs = 60_000

/**
 * The TLS material and request headers of a kubeconfig user: certificates and keys (files or inline data),
 * static or file tokens, basic auth, and exec credential plugins (token cached until it expires).
 */
export class Credentials {
  #cached?: {headers: Record<string, string>; until: number}
  #inFlight?: Promise<Record<string, string>>

  private constructor(
    private readonly config: ResolvedKubeConfig,
    readonly tls: TlsMaterial,
  ) {}

  static async load(config: ResolvedKubeConfig): Promise<Credentials> {
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
    const credentials = new Credentials(config, tls)
    if (user.exec) {
      // An exec plugin may hand out a client certificate instead of a token; TLS needs it before connecting.
      const status = await credentials.#runExec()
      if (status.clientCertificateData && status.clientKeyData) {
        tls.cert = Buffer.from(status.clientCertificateData)
        tls.key = Buffer.from(status.clientKeyData)
      }
      credentials.#remember(...execHeaders(status)) // the first request uses this run's token while it is valid
    }
    return credentials
  }

  /** Headers for the next request; `refresh` forces new credentials (after a 401). */
  async headers(refresh = false): Promise<Record<string, string>> {
    if (!refresh && this.#cached && Date.now() < this.#cached.until) return this.#cached.headers
    // Parallel requests share one refresh: an exec plugin runs once, not once per request.
    this.#inFlight ??= this.#fetchHeaders().finally(() => (this.#inFlight = undefined))
    return this.#inFlight
  }

  async #fetchHeaders(): Promise<Record<string, string>> {
    const {user} = this.config
    if (user.exec) return this.#remember(...execHeaders(await this.#runExec()))
    const headers: Record<string, string> = {}
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

  #remember(headers: Record<string, string>, until: number): Record<string, string> {
    if (this.config.user.impersonate) headers['Impersonate-User'] = this.config.user.impersonate
    this.#cached = {headers, until}
    return headers
  }

  async #runExec(): Promise<NonNullable<ExecCredential['status']>> {
    const exec = this.config.user.exec!
    const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1'
    const env = {
      ...process.env,
      ...Object.fromEntries((exec.env ?? []).map((e) => [e.name, e.value])),
      KUBERNETES_EXEC_INFO: JSON.stringify({apiVersion, kind: 'ExecCredential', spec: {interactive: false}}),
    }
    try {
      const {stdout} = await promisify(execFile)(exec.command, [...(exec.args ?? [])], {env, timeout: 60_000})
      const credential = JSON.parse(stdout) as ExecCredential
      return credential.status ?? {}
    } catch (error) {
      throw new ConfigError(`${this.config.origin}: credential plugin "${exec.command}" failed: ${errorMessage(error).split('\n')[0]}`, {cause: error})
    }
  }
}

/** An exec plugin's token as headers, valid until a little before the plugin's expiry. */
function execHeaders(status: NonNullable<ExecCredential['status']>): [Record<string, string>, number] {
  const headers: Record<string, string> = status.token ? {Authorization: `Bearer ${status.token}`} : {}
  const until = status.expirationTimestamp ? Date.parse(status.expirationTimestamp) - 10_000 : Number.POSITIVE_INFINITY
  return [headers, until]
}
