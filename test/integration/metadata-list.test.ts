import {expect} from 'chai'

import {gcKinds} from '../../src/lib/gc/kinds.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {MetadataInformer} from '../../src/lib/kube/informer.js'
import {listMetadata, listObjects, metadataListAccept, protobufMetadataListAccept, toMeta, unlabelledMetadataCodec, type ObjectCodec} from '../../src/lib/kube/metadata-list.js'
import {nodesResource, type ObjectMeta} from '../../src/lib/kube/resource.js'
import {createNode, createNodeFeature, createTopology, ensureNamespace, nfdNodeLabels, nodeFeaturePath} from '../../harness/controlplane/seed.js'
import {waitFor} from '../../harness/process/wait.js'
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

  it('lists Nodes without their labels when asked, in protobuf and in JSON: the same names, uids and versions', async function () {
    await createNode(client, 'pb-node-labelled', nfdNodeLabels('pb-node-labelled', 100))
    const labelled = await listMetadata(client, nodesResource, {pageSize: 3})
    expect(labelled.items.find((n) => n.name === 'pb-node-labelled')?.labels).to.have.property('feature.node.kubernetes.io/cpu-cpuid.AVX512F', 'true')
    const withoutLabels = labelled.items.map((n) => ({...n, labels: undefined}))
    const viaProtobuf = await listMetadata(client, nodesResource, {labels: false, pageSize: 3})
    const viaJson = await listObjects(client, nodesResource, {...unlabelledMetadataCodec, decodeListPage: undefined, listAccept: metadataListAccept}, {pageSize: 3})
    expect(viaProtobuf.items).to.deep.equal(withoutLabels)
    expect(viaJson.items).to.deep.equal(withoutLabels)
  })

  it("a metadata informer that keeps no labels holds none, from its list and from its watch (gc run's Node cache)", async function () {
    const controller = new AbortController()
    const unlabelled = new MetadataInformer({client, pageSize: 3, resource: nodesResource}, {labels: false})
    const labelled = new MetadataInformer({client, pageSize: 3, resource: nodesResource})
    try {
      await Promise.all([unlabelled.start(controller.signal), labelled.start(controller.signal)])
      expect(unlabelled.cache.get('pb-node-labelled')).to.include({labels: undefined, name: 'pb-node-labelled'})
      expect(labelled.cache.get('pb-node-labelled')?.labels).to.have.property('feature.node.kubernetes.io/cpu-cpuid.AVX512F', 'true')
      await createNode(client, 'pb-node-watched', nfdNodeLabels('pb-node-watched', 100))
      await waitFor('the new Node in both caches', async () => unlabelled.cache.has('pb-node-watched') && labelled.cache.has('pb-node-watched'), {intervalMs: 20, timeoutMs: 10_000})
      expect(unlabelled.cache.get('pb-node-watched')).to.include({labels: undefined, name: 'pb-node-watched'})
      expect(labelled.cache.get('pb-node-watched')?.labels).to.have.property('kubernetes.io/hostname', 'pb-node-watched')
    } finally {
      controller.abort()
      await Promise.all([unlabelled.stop(), labelled.stop()])
    }
  })

  it('an error answer to a protobuf request is still read as a Status (410 of an expired continue token, here a bad one)', async function () {
    let error: unknown
    await client.request('GET', '/api/v1/nodes', {accept: protobufMetadataListAccept, query: {continue: 'not-a-token', limit: 1}}).catch((e: unknown) => (error = e))
    expect(String(error)).to.match(/GET \/api\/v1\/nodes: 400 BadRequest: .*continue/)
  })
})
