import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {ResourceClaimObject} from './claim-preparation.js'

/** A ResourceClaim as the API server has it now; undefined when it does not exist. */
export type ReadClaim = (namespace: string, name: string) => Promise<ResourceClaimObject | undefined>

/** Reads ResourceClaims (resource.k8s.io/v1) through the client; any status but NotFound is thrown. */
export function claimReader(client: KubeClient): ReadClaim {
  return (namespace, name) =>
    client.request<ResourceClaimObject>('GET', `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/resourceclaims/${encodeURIComponent(name)}`).catch((error: unknown) => {
      if (isStatus(error, 'NotFound')) return undefined
      throw error
    })
}
