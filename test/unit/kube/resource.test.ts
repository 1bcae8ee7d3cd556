import {expect} from 'chai'

import {collectionPath, describeResource, nodesResource, objectPath, type ResourceRef} from '../../../src/lib/kube/resource.js'

const pods: ResourceRef = {group: '', namespaced: true, plural: 'pods', version: 'v1'}
const nodeFeatures: ResourceRef = {group: 'nfd.k8s-sigs.io', namespaced: true, plural: 'nodefeatures', version: 'v1alpha1'}
const topologies: ResourceRef = {group: 'topology.node.k8s.io', namespaced: false, plural: 'noderesourcetopologies', version: 'v1alpha2'}

describe('resource paths', () => {
  describe('collectionPath', () => {
    const cases: Array<[title: string, ref: ResourceRef, namespace: string | undefined, path: string]> = [
      ['core cluster-scoped', nodesResource, undefined, '/api/v1/nodes'],
      ['core namespaced', pods, 'default', '/api/v1/namespaces/default/pods'],
      ['core namespaced, all namespaces', pods, undefined, '/api/v1/pods'],
      ['group namespaced', nodeFeatures, 'nfd', '/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeatures'],
      ['group namespaced, all namespaces', nodeFeatures, undefined, '/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures'],
      ['group cluster-scoped', topologies, undefined, '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies'],
      ['cluster-scoped ignores a namespace', topologies, 'nfd', '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies'],
      ['core cluster-scoped ignores a namespace', nodesResource, 'default', '/api/v1/nodes'],
      ['encodes the namespace', nodeFeatures, 'a b/c', '/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/a%20b%2Fc/nodefeatures'],
    ]
    for (const [title, ref, namespace, path] of cases) {
      it(title, () => {
        expect(collectionPath(ref, namespace)).to.equal(path)
      })
    }
  })

  describe('objectPath', () => {
    const cases: Array<[title: string, ref: ResourceRef, name: string, namespace: string | undefined, path: string]> = [
      ['core cluster-scoped', nodesResource, 'worker-1', undefined, '/api/v1/nodes/worker-1'],
      ['core namespaced', pods, 'web-0', 'default', '/api/v1/namespaces/default/pods/web-0'],
      ['group namespaced', nodeFeatures, 'nf-a', 'nfd', '/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeatures/nf-a'],
      ['group cluster-scoped', topologies, 'worker-1', undefined, '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/worker-1'],
      ['cluster-scoped ignores a namespace', topologies, 'worker-1', 'nfd', '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/worker-1'],
      ['encodes a slash in the name', nodesResource, 'a/b', undefined, '/api/v1/nodes/a%2Fb'],
      ['encodes spaces, ?, # and %', nodesResource, 'a b?c#d%e', undefined, '/api/v1/nodes/a%20b%3Fc%23d%25e'],
      ['keeps dots and dashes in names', nodesResource, 'ip-10-0-0-1.ec2.internal', undefined, '/api/v1/nodes/ip-10-0-0-1.ec2.internal'],
      ['encodes non-ASCII', nodeFeatures, 'nœud', 'ns', '/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/ns/nodefeatures/n%C5%93ud'],
    ]
    for (const [title, ref, name, namespace, path] of cases) {
      it(title, () => {
        expect(objectPath(ref, name, namespace)).to.equal(path)
      })
    }

    it('throws a TypeError naming the resource for a namespaced resource without a namespace', () => {
      expect(() => objectPath(nodeFeatures, 'nf-a')).to.throw(TypeError, /nodefeatures is namespaced/)
      expect(() => objectPath(pods, 'web-0', undefined)).to.throw(TypeError, /pods/)
    })
  })

  describe('describeResource', () => {
    const cases: Array<[ref: ResourceRef, text: string]> = [
      [nodesResource, 'nodes/v1'],
      [nodeFeatures, 'nodefeatures.nfd.k8s-sigs.io/v1alpha1'],
      [topologies, 'noderesourcetopologies.topology.node.k8s.io/v1alpha2'],
    ]
    for (const [ref, text] of cases) {
      it(text, () => {
        expect(describeResource(ref)).to.equal(text)
      })
    }
  })
})
