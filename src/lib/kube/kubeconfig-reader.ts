import {readFileSync} from 'node:fs'
import {dirname, isAbsolute, join, resolve as resolvePath} from 'node:path'

import {ConfigError, errorMessage} from '../errors.js'
import {yaml} from '../yaml.js'
import {parseProxyUrl} from './proxy.js'

// One kubeconfig file read as kubectl reads it: its clusters, users and contexts by name, file paths in it
// resolved against its directory. Which files are read and how they merge is kubeconfig-resolver.ts's.

export interface ClusterEntry {
  readonly server: string
  readonly caFile?: string
  readonly caData?: string
  readonly insecureSkipTlsVerify?: boolean
  readonly tlsServerName?: string
  /** proxy-url: every request goes through it (loopback included), as client-go's http.ProxyURL. */
  readonly proxyUrl?: URL
  /** The cluster's `client.authentication.k8s.io/exec` extension: spec.cluster.config for exec plugins. */
  readonly execExtension?: unknown
}

export const interactiveModes = ['Never', 'IfAvailable', 'Always'] as const
export type InteractiveMode = (typeof interactiveModes)[number]

export interface ExecConfig {
  readonly command: string
  readonly args?: readonly string[]
  readonly env?: ReadonlyArray<{name: string; value: string}>
  readonly apiVersion?: string
  /** Checked by resolveKubeConfig for the user in use: required for v1, IfAvailable for v1beta1 (client-go's default). */
  readonly interactiveMode?: InteractiveMode
  readonly installHint?: string
  readonly provideClusterInfo?: boolean
}

/** as, as-groups, as-uid, as-user-extra: sent as the Impersonate-* headers. */
export interface Impersonation {
  readonly user?: string
  readonly groups: readonly string[]
  readonly uid?: string
  readonly extra: Readonly<Record<string, readonly string[]>>
}

/** `auth-provider: {name: oidc}`: its config, and the file that defined the user (refreshed tokens go there). */
export interface OidcProvider {
  readonly config: Readonly<Record<string, string>>
  readonly file: string
  readonly userName: string
}

export interface UserEntry {
  readonly clientCertificate?: string
  readonly clientCertificateData?: string
  readonly clientKey?: string
  readonly clientKeyData?: string
  readonly token?: string
  readonly tokenFile?: string
  readonly username?: string
  readonly password?: string
  readonly exec?: ExecConfig
  readonly impersonate?: Impersonation
  readonly oidc?: OidcProvider
  /** A removed auth-provider (gcp, azure, …), described for messages: refused when the chosen context uses this user. */
  readonly authProvider?: string
}

export interface Named<T> {
  readonly name: string
  readonly value: T
}

export interface ContextEntry {
  readonly cluster: string
  readonly user: string
  readonly namespace?: string
}

/** What one file defines, or several merged. */
export interface KubeconfigEntries {
  clusters: Array<Named<ClusterEntry>>
  users: Array<Named<UserEntry>>
  contexts: Array<Named<ContextEntry>>
  currentContext?: string
}

type Raw = Record<string, unknown>

export function readKubeconfig(file: string): KubeconfigEntries {
  let doc: unknown
  try {
    doc = yaml().parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new ConfigError(`kubeconfig ${file} cannot be read: ${errorMessage(error).split('\n')[0]}`, {cause: error})
  }
  if (doc === null || doc === undefined) return {clusters: [], contexts: [], users: []}
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError(`kubeconfig ${file} cannot be read: not a kubeconfig mapping`)
  const base = dirname(resolvePath(file))
  // Relative paths in a kubeconfig are relative to the file, as kubectl resolves them.
  const path = (p: unknown): string | undefined => (typeof p === 'string' && p !== '' ? (isAbsolute(p) ? p : join(base, p)) : undefined)
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)
  const strings = (v: unknown, what: string): string[] => {
    if (v === undefined || v === null) return []
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new ConfigError(`kubeconfig ${file} cannot be read: ${what} must be a list of strings`)
    return v as string[]
  }
  const list = (key: string, inner: string): Array<{name: string; body: Raw}> => {
    const value = (doc as Raw)[key]
    if (value === undefined || value === null) return []
    if (!Array.isArray(value)) throw new ConfigError(`kubeconfig ${file} cannot be read: "${key}" must be a list`)
    return value.map((item: unknown, i) => {
      const entry = (item ?? {}) as Raw
      if (typeof entry.name !== 'string') throw new ConfigError(`kubeconfig ${file} cannot be read: ${key}[${i}] has no name`)
      return {body: (entry[inner] ?? {}) as Raw, name: entry.name}
    })
  }
  return {
    clusters: list('clusters', 'cluster').map(({body, name}) => ({
      name,
      value: {
        caData: str(body['certificate-authority-data']),
        caFile: path(body['certificate-authority']),
        insecureSkipTlsVerify: body['insecure-skip-tls-verify'] === true,
        execExtension: execExtension(body.extensions),
        proxyUrl: str(body['proxy-url']) === undefined ? undefined : parseProxyUrl(str(body['proxy-url'])!, `kubeconfig ${file}: cluster "${name}"`),
        server: str(body.server) ?? '',
        tlsServerName: str(body['tls-server-name']),
      },
    })),
    contexts: list('contexts', 'context').map(({body, name}) => ({
      name,
      value: {cluster: str(body.cluster) ?? '', namespace: str(body.namespace), user: str(body.user) ?? ''},
    })),
    currentContext: str((doc as Raw)['current-context']),
    users: list('users', 'user').map(({body, name}) => {
      const provider = body['auth-provider'] as Raw | null | undefined
      const isOidc = provider?.name === 'oidc'
      const exec = body.exec as Raw | undefined
      const extra = (body['as-user-extra'] ?? {}) as Raw
      // kubectl resolves a command given as a path (it has a separator) against the kubeconfig's directory.
      const command = typeof exec?.command === 'string' && exec.command.includes('/') ? path(exec.command)! : exec?.command
      return {
        name,
        value: {
          clientCertificate: path(body['client-certificate']),
          clientCertificateData: str(body['client-certificate-data']),
          clientKey: path(body['client-key']),
          clientKeyData: str(body['client-key-data']),
          authProvider: provider === undefined || isOidc ? undefined : `"${(provider?.name as string | undefined) ?? 'unnamed'}" (in ${file})`,
          exec:
            exec && typeof command === 'string'
              ? {
                  apiVersion: str(exec.apiVersion),
                  args: exec.args as string[] | undefined,
                  command,
                  env: exec.env as ExecConfig['env'],
                  installHint: str(exec.installHint),
                  interactiveMode: str(exec.interactiveMode) as InteractiveMode | undefined,
                  provideClusterInfo: exec.provideClusterInfo === true,
                }
              : undefined,
          impersonate: impersonation(
            str(body.as),
            strings(body['as-groups'], `user "${name}": as-groups`),
            str(body['as-uid']),
            Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, strings(v, `user "${name}": as-user-extra.${k}`)])),
          ),
          oidc: isOidc ? {config: stringMap(provider?.config), file: resolvePath(file), userName: name} : undefined,
          password: str(body.password),
          token: str(body.token),
          tokenFile: path(body.tokenFile),
          username: str(body.username),
        },
      }
    }),
  }
}

function impersonation(user: string | undefined, groups: string[], uid: string | undefined, extra: Record<string, string[]>): Impersonation | undefined {
  if (user === undefined && groups.length === 0 && uid === undefined && Object.keys(extra).length === 0) return undefined
  return {extra, groups, uid, user}
}

function stringMap(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null) return {}
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'))
}

/** clusters[].cluster.extensions: a list of {name, extension}; the exec plugin's is spec.cluster.config. */
function execExtension(extensions: unknown): unknown {
  if (!Array.isArray(extensions)) return undefined
  return (extensions as Raw[]).find((e) => e?.name === 'client.authentication.k8s.io/exec')?.extension
}
