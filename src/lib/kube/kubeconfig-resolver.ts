import {existsSync} from 'node:fs'
import {isIPv6} from 'node:net'
import {homedir} from 'node:os'
import {delimiter, join} from 'node:path'

import {ConfigError} from '../errors.js'
import {interactiveModes, readKubeconfig, type ClusterEntry, type KubeconfigEntries, type Named, type UserEntry} from './kubeconfig-reader.js'

// Which cluster and user a command talks to, by kubectl's rules: the files to read, how they merge, the
// context, and what client-go refuses for the user in use. Our own, with kubeconfig-reader.ts:
// @kubernetes/client-node costs ~75 MB of RSS and ~750 ms just to import (its KubeConfig pulls in the
// whole generated API), more than `gc run`'s whole memory budget.

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
function mergeFiles(files: readonly string[]): KubeconfigEntries {
  const merged: KubeconfigEntries = {clusters: [], contexts: [], users: []}
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

function inCluster(env: NodeJS.ProcessEnv, dir: string): ResolvedKubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST!
  const port = env.KUBERNETES_SERVICE_PORT
  if (!port) throw new ConfigError('in-cluster configuration: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not')
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`
  return {cluster: {caFile: `${dir}/ca.crt`, server}, contexts: [], origin: 'in-cluster service account', server, user: {tokenFile: `${dir}/token`}}
}
