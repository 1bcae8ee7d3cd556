import {expect} from 'chai'
import {join} from 'node:path'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {adminClient} from '../support/cluster.js'
import {chartTools, deployDir, kustomize, type Tools} from '../support/chart.js'
import {placeManifest} from '../support/manifests.js'
import {upsert} from '../support/rbac.js'

describe('deploy/ manifests against a real kube-apiserver (server-side dry run, strict field validation)', function () {
  let client: KubeClient
  let tools: Tools

  before(async function () {
    ;({client} = await adminClient(this))
    tools = await chartTools(this)
  })

  after(function () {
    client?.close()
  })

  for (const component of ['gc', 'gc/cronjob', 'plugins', 'agent']) {
    it(`kubectl apply -k deploy/${component}: every object is accepted as kustomize renders it, with no unknown field`, async function () {
      const docs = await kustomize(tools, join(deployDir, component))
      expect(docs.length).to.be.greaterThan(2)
      const namespace = docs.find((d) => d.metadata.namespace !== undefined)!.metadata.namespace!
      // Dry-run objects in a namespace need the namespace itself.
      await upsert(client, '/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: namespace}})
      for (const doc of docs) {
        const file = `${doc.kind}/${doc.metadata.name}`
        const placed = placeManifest(doc, doc.metadata.namespace ?? namespace)
        expect(placed, `${file}: kind ${doc.kind}`).to.not.equal(undefined)
        const {body, collection} = placed!
        try {
          await client.request('POST', collection, {body, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        } catch (error) {
          // A Namespace (or cluster object) made by an earlier test is there already: a dry-run update must then pass.
          if (!String(error).includes('AlreadyExists')) throw new Error(`${component}/${file} ${doc.kind} ${doc.metadata.name}: ${String(error)}`, {cause: error})
          await client.request('PUT', `${collection}/${doc.metadata.name}`, {body, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        }
      }
    })
  }
})
