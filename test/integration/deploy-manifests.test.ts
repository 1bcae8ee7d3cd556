import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {parseAllDocuments} from 'yaml'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {adminClient} from '../support/cluster.js'
import {upsert} from '../support/rbac.js'

const deployDir = fileURLToPath(new URL('../../deploy/', import.meta.url))

interface Manifest {
  apiVersion: string
  kind: string
  metadata: {name: string; namespace?: string}
}

/** Where each kind of the deploy files is created (namespaced ones under the kustomization's namespace). */
const collections: Record<string, {base: string; plural: string; namespaced: boolean}> = {
  ClusterRole: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: false, plural: 'clusterroles'},
  ClusterRoleBinding: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: false, plural: 'clusterrolebindings'},
  CronJob: {base: '/apis/batch/v1', namespaced: true, plural: 'cronjobs'},
  DaemonSet: {base: '/apis/apps/v1', namespaced: true, plural: 'daemonsets'},
  Deployment: {base: '/apis/apps/v1', namespaced: true, plural: 'deployments'},
  Namespace: {base: '/api/v1', namespaced: false, plural: 'namespaces'},
  Role: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: true, plural: 'roles'},
  RoleBinding: {base: '/apis/rbac.authorization.k8s.io/v1', namespaced: true, plural: 'rolebindings'},
  ServiceAccount: {base: '/api/v1', namespaced: true, plural: 'serviceaccounts'},
}

async function manifests(component: string): Promise<{namespace: string; docs: Array<{file: string; doc: Manifest}>}> {
  const dir = join(deployDir, component)
  const kustomization = parseAllDocuments(await readFile(join(dir, 'kustomization.yaml'), 'utf8'))[0].toJS() as {namespace: string; resources: string[]}
  const docs: Array<{file: string; doc: Manifest}> = []
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()) {
    for (const d of parseAllDocuments(await readFile(join(dir, file), 'utf8'))) docs.push({doc: d.toJS() as Manifest, file})
  }
  return {docs, namespace: kustomization.namespace}
}

describe('deploy/ manifests against a real kube-apiserver (server-side dry run, strict field validation)', function () {
  let client: KubeClient

  before(async function () {
    ;({client} = await adminClient(this))
  })

  after(function () {
    client?.close()
  })

  for (const component of ['gc', 'plugins', 'agent']) {
    it(`deploy/${component}: every object is accepted as written, with no unknown field`, async function () {
      const {docs, namespace} = await manifests(component)
      expect(docs.length).to.be.greaterThan(2)
      // Dry-run objects in a namespace need the namespace itself.
      await upsert(client, '/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: namespace}})
      for (const {doc, file} of docs) {
        const where = collections[doc.kind]
        expect(where, `${file}: kind ${doc.kind}`).to.not.equal(undefined)
        const path = `${where.base}${where.namespaced ? `/namespaces/${namespace}` : ''}/${where.plural}`
        try {
          await client.request('POST', path, {body: {...doc, metadata: {...doc.metadata, namespace: where.namespaced ? namespace : undefined}}, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        } catch (error) {
          // A Namespace (or cluster object) made by an earlier test is there already: a dry-run update must then pass.
          if (!String(error).includes('AlreadyExists')) throw new Error(`${component}/${file} ${doc.kind} ${doc.metadata.name}: ${String(error)}`, {cause: error})
          await client.request('PUT', `${path}/${doc.metadata.name}`, {body: {...doc, metadata: {...doc.metadata, namespace: where.namespaced ? namespace : undefined}}, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        }
      }
    })
  }
})
