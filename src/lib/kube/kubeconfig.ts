import {existsSync, readFileSync} from 'node:fs'
import {isIPv6} from 'node:net'
import {homedir} from 'node:os'
import {delimiter, dirname, isAbsolute, join, resolve as resolvePath} from 'node:path'

import {ConfigError, errorMessage} from '../errors.js'
import {yaml} from '../yaml.js'
import {parseProxyUrl} from './proxy.js'

// Our own kubeconfig reader: @kubernetes/client-node costs ~75 MB of RSS and ~750 ms just to import (its
// KubeConfig pulls in the whole generated API), more than `gc run`'s whole memory budget.

export interface KubeConfigSource {
  /** --kubeconfig; wins over everything else. */
  readonly kubeconfig?: string
  /** --context; default: the file's current-context. */
  readonly context?: string
  /** The environment (KUBECONFIG, KUBERNETES_SERVICE_HOST); passed in so tests need not mutate process.env. */
  readonly env?: NodeJS.ProcessEnv
  readonly home?: string
  /** Where the in-cluster service-account files live (a prefix, for tests). */
  readonly serviceAccountRoot?: string
}

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

const interactiveModes = ['Never', 'IfAvailable', 'Always'] as const
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

export interface ResolvedKubeConfig {
  /** Human description of where it came from, for messages: "kubeconfig /x (context y)" or "in-cluster". */
  readonly origin: string
  readonly server: string
  readonly context?: string
  /** The context's namespace: the default namespace outside a pod (see ownNamespace). */
  readonly namespace?: string
  /** Every context name the merged files define. */
  readonly contexts: readonly string[]
  readonly cluster: ClusterEntry
  readonly user: UserEntry
}

const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount'

interface Named<T> {
  readonly name: string
  readonly value: T
}

interface Merged {
  clusters: Array<Named<ClusterEntry>>
  users: Array<Named<UserEntry>>
  contexts: Array<Named<{cluster: string; user: string; namespace?: string}>>
  currentContext?: string
}

/** Standard kubeconfig resolution: --kubeconfig, KUBECONFIG, ~/.kube/config, then in-cluster. */
export function resolveKubeConfig(source: KubeConfigSource = {}): ResolvedKubeConfig {
  const env = source.env ?? process.env
  const home = source.home ?? homedir()
  let files: string[]
  let origin: string
  if (source.kubeconfig !== undefined) {
    if (!existsSync(source.kubeconfig)) {
      throw new ConfigError(`kubeconfig ${source.kubeconfig} does not exist; pass an existing file with --kubeconfig`)
    }
    files = [source.kubeconfig]
    origin = `kubeconfig ${source.kubeconfig}`
  } else if (env.KUBECONFIG) {
    files = env.KUBECONFIG.split(delimiter).filter((f) => f.length > 0 && existsSync(f))
    if (files.length === 0) throw new ConfigError(`KUBECONFIG names no existing file (${env.KUBECONFIG}); fix it or pass --kubeconfig`)
    origin = `kubeconfig ${files.join(delimiter)} (from KUBECONFIG)`
  } else if (existsSync(join(home, '.kube', 'config'))) {
    files = [join(home, '.kube', 'config')]
    origin = `kubeconfig ${files[0]}`
  } else if (env.KUBERNETES_SERVICE_HOST && existsSync(`${source.serviceAccountRoot ?? ''}${serviceAccountDir}/token`)) {
    if (source.context !== undefined) throw new ConfigError('--context needs a kubeconfig; in-cluster configuration has no contexts')
    return inCluster(env, `${source.serviceAccountRoot ?? ''}${serviceAccountDir}`)
  } else {
    throw new ConfigError('no Kubernetes configuration found; pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config')
  }

  const merged = mergeFiles(files)
  const contexts = merged.contexts.map((c) => c.name)
  const contextName = source.context ?? merged.currentContext
  if (source.context !== undefined && !contexts.includes(source.context)) {
    throw new ConfigError(`context "${source.context}" is not in ${origin}; available: ${contexts.join(', ') || 'none'}`)
  }
  const context = merged.contexts.find((c) => c.name === contextName)
  if (!contextName || !context) throw new ConfigError(`${origin} has no current context; pass --context (available: ${contexts.join(', ') || 'none'})`)
  const cluster = merged.clusters.find((c) => c.name === context.value.cluster)?.value
  if (!cluster?.server) throw new ConfigError(`context "${contextName}" in ${origin} names no cluster with a server`)
  const user = merged.users.find((u) => u.name === context.value.user)?.value ?? {}
  checkUser(user, context.value.user, origin)
  const {namespace} = context.value
  return {cluster, context: contextName, contexts, namespace, origin: `${origin} (context ${contextName})`, server: cluster.server, user}
}

/** What client-go refuses for the user in use (other users of the files may be anything, as in kubectl). */
function checkUser(user: UserEntry, name: string, origin: string): void {
  const where = `${origin}: user "${name}"`
  if (user.authProvider) {
    throw new ConfigError(`${where} uses the auth-provider ${user.authProvider}, which kubectl removed; switch it to an exec credential plugin`)
  }
  if (user.oidc) {
    for (const key of ['idp-issuer-url', 'client-id']) {
      if (!user.oidc.config[key]) throw new ConfigError(`${where}: auth-provider oidc needs ${key} in its config (as kubectl)`)
    }
  }
  const as = user.impersonate
  if (as && as.user === undefined) {
    // client-go would send them with an empty Impersonate-User, which the API server refuses.
    throw new ConfigError(`${where}: as-groups, as-uid and as-user-extra need "as" (the user to impersonate)`)
  }
  const exec = user.exec
  if (!exec) return
  if (!exec.apiVersion) throw new ConfigError(`${where}: exec needs an apiVersion, e.g. client.authentication.k8s.io/v1 (as kubectl)`)
  if (exec.interactiveMode === undefined && exec.apiVersion === 'client.authentication.k8s.io/v1') {
    throw new ConfigError(`${where}: exec with apiVersion client.authentication.k8s.io/v1 needs interactiveMode (Never, IfAvailable or Always), as kubectl`)
  }
  if (exec.interactiveMode !== undefined && !(interactiveModes as readonly string[]).includes(exec.interactiveMode)) {
    throw new ConfigError(`${where}: exec interactiveMode must be Never, IfAvailable or Always, got "${exec.interactiveMode}"`)
  }
}

/** kubectl's merge rules: the first file to set current-context, or to define a name, wins. */
function mergeFiles(files: readonly string[]): Merged {
  const merged: Merged = {clusters: [], contexts: [], users: []}
  const add = <T>(into: Array<Named<T>>, items: Array<Named<T>>): void => {
    for (const item of items) if (!into.some((x) => x.name === item.name)) into.push(item)
  }
  for (const file of files) {
    const one = readKubeconfig(file)
    add(merged.clusters, one.clusters)
    add(merged.users, one.users)
    add(merged.contexts, one.contexts)
    merged.currentContext ||= one.currentContext
  }
  return merged
}

type Raw = Record<string, unknown>

function readKubeconfig(file: string): Merged {
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

function inCluster(env: NodeJS.ProcessEnv, dir: string): ResolvedKubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST!
  const port = env.KUBERNETES_SERVICE_PORT
  if (!port) throw new ConfigError('in-cluster configuration: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not')
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`
  return {cluster: {caFile: `${dir}/ca.crt`, server}, contexts: [], origin: 'in-cluster service account', server, user: {tokenFile: `${dir}/token`}}
}
