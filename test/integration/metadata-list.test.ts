import {expect} from 'chai'

import {gcKinds} from '../../src/lib/gc/kinds.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {listMetadata, listObjects, metadataListAccept, protobufMetadataListAccept, toMeta, type ObjectCodec} from '../../src/lib/kube/metadata-list.js'
import {nodesResource, type ObjectMeta} from '../../src/lib/kube/resource.js'
import {createNode, createNodeFeature, createTopology, ensureNamespace, nodeFeaturePath} from '../../harness/controlplane/seed.js'
import {adminClient} from '../support/cluster.js'

/** The same metadata read as JSON: what nfdctl read before it asked for protobuf. */
const jsonMetadataCodec: ObjectCodec<ObjectMeta> = {
  listAccept: metadataListAccept,
  metaOf: (m) => m,
  toItem: (raw) => toMeta((raw as {metadata: ObjectMeta}).metadata),
  watchAccept: metadataListAccept,
}

describe('metadata lists in protobuf on a real API server', function () {
  let client: KubeClient
  const namespace = 'pb-meta'

  before(async function () {
    ;({client} = await adminClient(this))
    await ensureNamespace(client, namespace)
    for (let i = 0; i < 7; i++) {
      await createNode(client, `pb-node-${i}`)
      await createNodeFeature(client, namespace, `pb-node-${i}`, i === 3 ? undefined : `pb-node-${i}`)
      await createTopology(client, `pb-node-${i}`)
    }
    // One being deleted, held by a finalizer: its deletionTimestamp must come through.
    await client.request('PATCH', nodeFeaturePath(namespace, 'pb-node-5'), {body: {metadata: {finalizers: ['example.com/hold']}}, contentType: 'application/merge-patch+json'})
    await client.request('DELETE', nodeFeaturePath(namespace, 'pb-node-5'))
  })

  after(async function () {
    await client?.request('PATCH', nodeFeaturePath(namespace, 'pb-node-5'), {body: {metadata: {finalizers: null}}, contentType: 'application/merge-patch+json'}).catch(() => {})
    client?.close()
  })

  it('the server answers metadata lists of CRDs and of Nodes in protobuf', async function () {
    for (const path of ['/api/v1/nodes', '/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures', '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies']) {
      const body = await client.request<unknown>('GET', path, {accept: protobufMetadataListAccept, query: {limit: 2}})
      expect(Buffer.isBuffer(body), path).to.equal(true)
    }
  })

  it('decodes to exactly what the JSON list gives, page by page, labels, namespaces and deletionTimestamp included', async function () {
    for (const ref of [nodesResource, ...gcKinds.map((k) => k.resource)]) {
      const viaProtobuf = await listMetadata(client, ref, {pageSize: 2})
      const viaJson = await listObjects(client, ref, jsonMetadataCodec, {pageSize: 2})
      expect(viaProtobuf.items.length, ref.plural).to.be.greaterThan(6)
      expect(viaProtobuf.pages, ref.plural).to.equal(viaJson.pages)
      expect(viaProtobuf.items, ref.plural).to.deep.equal(viaJson.items)
    }
    const held = (await listMetadata(client, gcKinds[0]!.resource, {namespace, pageSize: 0})).items.find((m) => m.name === 'pb-node-5')
    expect(held?.deletionTimestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(held?.labels).to.deep.equal({'nfd.node.kubernetes.io/node-name': 'pb-node-5'})
  })

  it('an error answer to a protobuf request is still read as a Status (410 of an expired continue token, here a bad one)', async function () {
    let error: unknown
    await client.request('GET', '/api/v1/nodes', {accept: protobufMetadataListAccept, query: {continue: 'not-a-token', limit: 1}}).catch((e: unknown) => (error = e))
    expect(String(error)).to.match(/GET \/api\/v1\/nodes: 400 BadRequest: .*continue/)
  })
})
