import {KubeConfig} from '@kubernetes/client-node'
import {existsSync} from 'node:fs'
import {isIPv6} from 'node:net'
import {homedir} from 'node:os'
import {delimiter, join} from 'node:path'

import {ConfigError, errorMessage} from '../errors.js'

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
  readonly config: KubeConfig
  /** Human description of where it came from, for messages: "kubeconfig /x (context y)" or "in-cluster". */
  readonly origin: string
  readonly server: string
}

const serviceAccountToken = '/var/run/secrets/kubernetes.io/serviceaccount/token'

/** Standard kubeconfig resolution: --kubeconfig, KUBECONFIG, ~/.kube/config, then in-cluster. */
export function resolveKubeConfig(source: KubeConfigSource = {}): ResolvedKubeConfig {
  const env = source.env ?? process.env
  const config = new KubeConfig()
  let origin: string
  if (source.kubeconfig !== undefined) {
    if (!existsSync(source.kubeconfig)) {
      throw new ConfigError(`kubeconfig ${source.kubeconfig} does not exist; pass an existing file with --kubeconfig`)
    }
    load(config, [source.kubeconfig])
    origin = `kubeconfig ${source.kubeconfig}`
  } else if (env.KUBECONFIG) {
    const files = env.KUBECONFIG.split(delimiter).filter((f) => f.length > 0)
    const present = files.filter((f) => existsSync(f))
    if (present.length === 0) {
      throw new ConfigError(`KUBECONFIG names no existing file (${env.KUBECONFIG}); fix it or pass --kubeconfig`)
    }
    load(config, present)
    origin = `kubeconfig ${present.join(delimiter)} (from KUBECONFIG)`
  } else if (existsSync(join(source.home ?? homedir(), '.kube', 'config'))) {
    const file = join(source.home ?? homedir(), '.kube', 'config')
    load(config, [file])
    origin = `kubeconfig ${file}`
  } else if (env.KUBERNETES_SERVICE_HOST && existsSync((source.serviceAccountRoot ?? '') + serviceAccountToken)) {
    if (source.context !== undefined) throw new ConfigError('--context needs a kubeconfig; in-cluster configuration has no contexts')
    const server = inClusterServer(env)
    config.loadFromCluster(source.serviceAccountRoot)
    // loadFromCluster reads process.env itself; the server comes from the environment we were given.
    config.clusters = config.clusters.map((c) => ({...c, server}))
    return {config, origin: 'in-cluster service account', server}
  } else {
    throw new ConfigError('no Kubernetes configuration found; pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config')
  }

  if (source.context !== undefined) {
    const names = config.getContexts().map((c) => c.name)
    if (!names.includes(source.context)) {
      throw new ConfigError(`context "${source.context}" is not in ${origin}; available: ${names.join(', ') || 'none'}`)
    }
    config.setCurrentContext(source.context)
  }
  const context = config.getCurrentContext()
  if (!context || config.getContextObject(context) === null) {
    throw new ConfigError(`${origin} has no current context; pass --context`)
  }
  const server = config.getCurrentCluster()?.server
  if (!server) throw new ConfigError(`context "${context}" in ${origin} names no cluster server`)
  return {config, origin: `${origin} (context ${context})`, server}
}

function inClusterServer(env: NodeJS.ProcessEnv): string {
  const host = env.KUBERNETES_SERVICE_HOST!
  const port = env.KUBERNETES_SERVICE_PORT
  if (!port) throw new ConfigError('in-cluster configuration: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not')
  return `https://${isIPv6(host) ? `[${host}]` : host}:${port}`
}

/**
 * Loads the files in order with kubectl's merge rules: the first file to set current-context, or to
 * define a cluster, user or context of a given name, wins; later duplicates are ignored.
 */
function load(config: KubeConfig, files: string[]): void {
  for (const [i, file] of files.entries()) {
    const next = i === 0 ? config : new KubeConfig()
    try {
      next.loadFromFile(file)
    } catch (error) {
      throw new ConfigError(`kubeconfig ${file} cannot be read: ${errorMessage(error).split('\n')[0]}`, {cause: error})
    }
    if (i === 0) continue
    const has = (list: ReadonlyArray<{name: string}>, name: string): boolean => list.some((x) => x.name === name)
    for (const cluster of next.clusters) if (!has(config.clusters, cluster.name)) config.addCluster(cluster)
    for (const user of next.users) if (!has(config.users, user.name)) config.addUser(user)
    for (const context of next.contexts) if (!has(config.contexts, context.name)) config.addContext(context)
    if (!config.getCurrentContext() && next.getCurrentContext()) config.setCurrentContext(next.getCurrentContext())
  }
}
