import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {parseAllDocuments} from 'yaml'

const deployDir = fileURLToPath(new URL('../../deploy/', import.meta.url))

export interface Manifest {
  apiVersion: string
  kind: string
  metadata: {name: string; namespace?: string}
  [field: string]: unknown
}

/** Where each kind of the deploy files is created (namespaced ones under the kustomization's namespace). */
const collections: Record<string, {base: string; plural: string; namespaced: boolean}> = {
  ClusterRole: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: false, plural: 'clusterroles'},
  ClusterRoleBinding: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: false, plural: 'clusterrolebindings'},
  CronJob: {base: '/apis/batch/v1', namespaced: true, plural: 'cronjobs'},
  DaemonSet: {base: '/apis/apps/v1', namespaced: true, plural: 'daemonsets'},
  Deployment: {base: '/apis/apps/v1', namespaced: true, plural: 'deployments'},
  Namespace: {base: '/api/v1', namespaced: false, plural: 'namespaces'},
  PodDisruptionBudget: {base: '/apis/policy/v1', namespaced: true, plural: 'poddisruptionbudgets'},
  Role: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: true, plural: 'roles'},
  RoleBinding: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: true, plural: 'rolebindings'},
  ServiceAccount: {base: '/api/v1', namespaced: true, plural: 'serviceaccounts'},
  ValidatingAdmissionPolicy: {base: '/apis/admissionregistration.k8s.io/v1', namespaced: false, plural: 'validatingadmissionpolicies'},
  ValidatingAdmissionPolicyBinding: {base: '/apis/admissionregistration.k8s.io/v1', namespaced: false, plural: 'validatingadmissionpolicybindings'},
}

/** The objects of one deploy/<component>/ file, or of every file of it but kustomization.yaml, and its kustomization's namespace. */
export async function readManifests(component: string, only?: readonly string[]): Promise<{namespace: string; docs: Array<{file: string; doc: Manifest}>}> {
  const dir = join(deployDir, component)
  const kustomization = parseAllDocuments(await readFile(join(dir, 'kustomization.yaml'), 'utf8'))[0].toJS() as {namespace: string}
  const files = only ?? (await readdir(dir)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()
  const docs: Array<{file: string; doc: Manifest}> = []
  for (const file of files) {
    for (const d of parseAllDocuments(await readFile(join(dir, file), 'utf8'))) docs.push({doc: d.toJS() as Manifest, file})
  }
  return {docs, namespace: kustomization.namespace}
}

/**
 * The collection a manifest is created in and the body to send, as `kubectl apply -k` would: namespaced
 * kinds in the kustomization's namespace, cluster-scoped ones without any. Undefined for a kind not listed.
 */
export function placeManifest(doc: Manifest, namespace: string): {collection: string; body: Manifest} | undefined {
  const where = collections[doc.kind]
  if (where === undefined) return undefined
  return {
    body: {...doc, metadata: {...doc.metadata, namespace: where.namespaced ? namespace : undefined}},
    collection: `${where.base}${where.namespaced ? `/namespaces/${namespace}` : ''}/${where.plural}`,
  }
}
