import {existsSync, readFileSync} from 'node:fs'
import {isIPv6} from 'node:net'
import {homedir} from 'node:os'
import {delimiter, dirname, isAbsolute, join, resolve as resolvePath} from 'node:path'
import {parse} from 'yaml'

import {ConfigError, errorMessage} from '../errors.js'

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
}

export interface ExecConfig {
  readonly command: string
  readonly args?: readonly string[]
  readonly env?: ReadonlyArray<{name: string; value: string}>
  readonly apiVersion?: string
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
  readonly impersonate?: string
  /** A legacy auth-provider name: refused when the chosen context uses this user. */
  readonly authProvider?: string
}

export interface ResolvedKubeConfig {
  /** Human description of where it came from, for messages: "kubeconfig /x (context y)" or "in-cluster". */
  readonly origin: string
  readonly server: string
  readonly context?: string
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
  contexts: Array<Named<{cluster: string; user: string}>>
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
  if (user.authProvider) {
    throw new ConfigError(`${origin}: user "${context.value.user}" uses the removed auth-provider ${user.authProvider}; switch it to an exec credential plugin`)
  }
  return {cluster, context: contextName, contexts, origin: `${origin} (context ${contextName})`, server: cluster.server, user}
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
    doc = parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new ConfigError(`kubeconfig ${file} cannot be read: ${errorMessage(error).split('\n')[0]}`, {cause: error})
  }
  if (doc === null || doc === undefined) return {clusters: [], contexts: [], users: []}
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError(`kubeconfig ${file} cannot be read: not a kubeconfig mapping`)
  const base = dirname(resolvePath(file))
  // Relative paths in a kubeconfig are relative to the file, as kubectl resolves them.
  const path = (p: unknown): string | undefined => (typeof p === 'string' && p !== '' ? (isAbsolute(p) ? p : join(base, p)) : undefined)
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined)
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
        server: str(body.server) ?? '',
        tlsServerName: str(body['tls-server-name']),
      },
    })),
    contexts: list('contexts', 'context').map(({body, name}) => ({name, value: {cluster: str(body.cluster) ?? '', user: str(body.user) ?? ''}})),
    currentContext: str((doc as Raw)['current-context']),
    users: list('users', 'user').map(({body, name}) => {
      const provider = body['auth-provider'] as Raw | null | undefined
      const exec = body.exec as Raw | undefined
      // kubectl resolves a command given as a path (it has a separator) against the kubeconfig's directory.
      const command = typeof exec?.command === 'string' && exec.command.includes('/') ? path(exec.command)! : exec?.command
      return {
        name,
        value: {
          clientCertificate: path(body['client-certificate']),
          clientCertificateData: str(body['client-certificate-data']),
          clientKey: path(body['client-key']),
          clientKeyData: str(body['client-key-data']),
          authProvider: provider === undefined ? undefined : `"${(provider?.name as string | undefined) ?? 'unnamed'}" (in ${file})`,
          exec: exec && typeof command === 'string'
            ? {apiVersion: str(exec.apiVersion), args: exec.args as string[] | undefined, command, env: exec.env as ExecConfig['env']}
            : undefined,
          impersonate: str(body.as),
          password: str(body.password),
          token: str(body.token),
          tokenFile: path(body.tokenFile),
          username: str(body.username),
        },
      }
    }),
  }
}

function inCluster(env: NodeJS.ProcessEnv, dir: string): ResolvedKubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST!
  const port = env.KUBERNETES_SERVICE_PORT
  if (!port) throw new ConfigError('in-cluster configuration: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not')
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`
  return {cluster: {caFile: `${dir}/ca.crt`, server}, contexts: [], origin: 'in-cluster service account', server, user: {tokenFile: `${dir}/token`}}
}
