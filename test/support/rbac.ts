import {isStatus} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'

export interface PolicyRule {
  readonly apiGroups: readonly string[]
  readonly resources: readonly string[]
  readonly verbs: readonly string[]
}

/** Creates (or replaces) a ClusterRole with `rules` and binds it to `user`. */
export async function bindClusterRole(client: KubeClient, name: string, user: string, rules: readonly PolicyRule[]): Promise<void> {
  const role = {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name}, rules}
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: {name},
    roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name},
    subjects: [{apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user}],
  }
  await upsert(client, '/apis/rbac.authorization.k8s.io/v1/clusterroles', role)
  await upsert(client, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', binding)
}

/** Creates the object, or replaces it when it exists. */
export async function upsert(client: KubeClient, collection: string, body: {metadata: {name: string; namespace?: string}; [key: string]: unknown}): Promise<void> {
  try {
    await client.request('POST', collection, {body})
  } catch (error) {
    if (!isStatus(error, 'Conflict')) throw error
    await client.request('PUT', `${collection}/${body.metadata.name}`, {body})
  }
}
