import {Credentials, type CredentialsOptions} from './credentials.js'
import {createHttpAgent} from './http-agent.js'
import {KubeClient, type KubeClientOptions} from './kube-client.js'
import {resolveKubeConfig, type KubeConfigSource} from './kubeconfig-resolver.js'
import {proxyFor} from './proxy.js'

export interface OpenedCluster {
  readonly client: KubeClient
  readonly origin: string
  /** The context's namespace, when it sets one. */
  readonly namespace?: string
  /** The proxy requests go through (proxy-url, else HTTPS_PROXY/HTTP_PROXY unless NO_PROXY or loopback). */
  readonly proxy?: URL
}

/** Resolves the kubeconfig, loads its credentials and opens a client on its current context. */
export async function openCluster(source: KubeConfigSource, options: KubeClientOptions, credentialOptions: CredentialsOptions = {}): Promise<OpenedCluster> {
  const resolved = resolveKubeConfig(source)
  const env = source.env ?? process.env
  const server = new URL(resolved.server)
  const proxy = proxyFor(server, {env, proxyUrl: resolved.cluster.proxyUrl})
  const credentials = await Credentials.load(resolved, {env, ...credentialOptions})
  const agent = options.agent ?? (await createHttpAgent(server, credentials.tls, {maxSockets: options.maxConnections ?? 64, proxy}))
  const client = new KubeClient(resolved.server, credentials, {...options, agent})
  return {client, namespace: resolved.namespace, origin: proxy ? `${resolved.origin} via proxy ${proxy.origin}` : resolved.origin, proxy}
}
