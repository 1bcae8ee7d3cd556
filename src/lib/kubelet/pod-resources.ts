import {unary} from '../grpc-unary.js'
import {kubeletApi, type ListPodResourcesResponse, type PodResources} from './device-plugin-api.js'

/** kubelet's default PodResources socket (it follows kubelet's --root-dir). */
const defaultPodResourcesSocket = '/var/lib/kubelet/pod-resources/kubelet.sock'

/** Every pod's containers with the device IDs kubelet allocated to them, from kubelet's PodResources API v1. */
export async function listPodResources(socket = defaultPodResourcesSocket, timeoutMs = 5000): Promise<PodResources[]> {
  const api = await kubeletApi()
  const client = new api.podResourcesLister(`unix:${socket}`, api.grpc.credentials.createInsecure())
  try {
    const answer = await unary<object, ListPodResourcesResponse>(client, 'List', {}, timeoutMs)
    return answer.pod_resources
  } finally {
    client.close()
  }
}

/** A pod as the node knows it: by name (PodResources' only key) and by UID (everything else's). */
export interface KnownPod {
  readonly namespace: string
  readonly name: string
  readonly uid: string
}

/**
 * Pure. kubelet's allocations, told apart by pod. PodResources names pods by namespace and name only (v1 has
 * no UID), and for a while a pod re-created under the same name and the old one can both be on the node:
 * kubelet lists both (the old one until its containers are gone), or lists one while containers of the other
 * still run. Whose devices an entry holds is then unknowable, so for such a name `devicesOf` answers
 * undefined ("cannot tell"): the caller gives nothing new and takes nothing away until one pod is left.
 * `known` is every pod the node knows of: the informer's pods and the pods of containerd's containers.
 */
export function podAllocations(listed: readonly PodResources[], known: Iterable<KnownPod>): PodAllocations {
  const byName = new Map<string, PodResources[]>()
  for (const pod of listed) byName.set(nameKey(pod), [...(byName.get(nameKey(pod)) ?? []), pod])
  const uids = new Map<string, Set<string>>()
  for (const pod of known) uids.set(nameKey(pod), (uids.get(nameKey(pod)) ?? new Set()).add(pod.uid))
  const ambiguous = new Set([...byName].filter(([, entries]) => entries.length > 1).map(([key]) => key))
  for (const [key, set] of uids) if (set.size > 1 && byName.has(key)) ambiguous.add(key)
  return {
    ambiguous: [...ambiguous].sort(),
    devicesOf(pod, container, resourceName) {
      if (ambiguous.has(nameKey(pod))) return undefined
      const found = byName.get(nameKey(pod))?.[0]?.containers.find((c) => c.name === container)
      return found?.devices.filter((d) => d.resource_name === resourceName).flatMap((d) => d.device_ids) ?? []
    },
  }
}

export interface PodAllocations {
  /** `namespace/name` of the pods whose entry cannot be told apart from another pod's of the same name. */
  readonly ambiguous: readonly string[]
  /** The device IDs of one resource kubelet gave a container (empty: none); undefined when it cannot be told whose they are. */
  devicesOf(pod: {namespace: string; name: string}, container: string, resourceName: string): string[] | undefined
}

const nameKey = (pod: {namespace: string; name: string}): string => `${pod.namespace}/${pod.name}`
