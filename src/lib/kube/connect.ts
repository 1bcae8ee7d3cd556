import {KubeClient, type KubeClientOptions} from './kube-client.js'
import {resolveKubeConfig, type KubeConfigSource} from './kubeconfig.js'

/** Resolves the kubeconfig and opens a client on its current context. */
export async function openCluster(source: KubeConfigSource, options: KubeClientOptions): Promise<{client: KubeClient; origin: string}> {
  const resolved = resolveKubeConfig(source)
  const client = await KubeClient.open(resolved.config, resolved.server, options)
  return {client, origin: resolved.origin}
}
