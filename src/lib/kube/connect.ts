import {Credentials} from './credentials.js'
import {KubeClient, type KubeClientOptions} from './kube-client.js'
import {resolveKubeConfig, type KubeConfigSource} from './kubeconfig.js'

/** Resolves the kubeconfig, loads its credentials and opens a client on its current context. */
export async function openCluster(source: KubeConfigSource, options: KubeClientOptions): Promise<{client: KubeClient; origin: string}> {
  const resolved = resolveKubeConfig(source)
  const client = new KubeClient(resolved.server, await Credentials.load(resolved), options)
  return {client, origin: resolved.origin}
}
