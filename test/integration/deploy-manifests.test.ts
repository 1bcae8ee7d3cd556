import {expect} from 'chai'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {adminClient} from '../support/cluster.js'
import {placeManifest, readManifests} from '../support/manifests.js'
import {upsert} from '../support/rbac.js'

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
      const {docs, namespace} = await readManifests(component)
      expect(docs.length).to.be.greaterThan(2)
      // Dry-run objects in a namespace need the namespace itself.
      await upsert(client, '/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: namespace}})
      for (const {doc, file} of docs) {
        const placed = placeManifest(doc, namespace)
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
