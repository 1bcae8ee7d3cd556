import {unary} from '../grpc-unary.js'
import {kubeletApi, type PodResources} from './kubelet-api.js'

/** kubelet's default PodResources socket (it follows kubelet's --root-dir). */
export const defaultPodResourcesSocket = '/var/lib/kubelet/pod-resources/kubelet.sock'

/** Every pod's containers with the device IDs kubelet allocated to them, from kubelet's PodResources API v1. */
export async function listPodResources(socket = defaultPodResourcesSocket, timeoutMs = 5000): Promise<PodResources[]> {
  const api = await kubeletApi()
  const client = new api.podResourcesLister(`unix:${socket}`, api.grpc.credentials.createInsecure())
  try {
    const answer = await unary<object, {pod_resources: PodResources[]}>(client, 'List', {}, timeoutMs)
    return answer.pod_resources
  } finally {
    client.close()
  }
}

/** The device IDs of one resource kubelet gave a container; empty when it has none. */
export function allocatedDevices(pods: readonly PodResources[], pod: {namespace: string; name: string}, container: string, resourceName: string): string[] {
  const found = pods.find((p) => p.namespace === pod.namespace && p.name === pod.name)?.containers.find((c) => c.name === container)
  return found?.devices.filter((d) => d.resource_name === resourceName).flatMap((d) => d.device_ids) ?? []
}
