import {expect} from 'chai'

import {findGcKind, gcKindNames, gcKinds, nodeNameLabel} from '../../../src/lib/gc/kinds.js'
import type {ObjectMeta} from '../../../src/lib/kube/resource.js'

describe('gc kinds', () => {
  it('registers NodeFeature and NodeResourceTopology, in that order', () => {
    expect(gcKindNames).to.deep.equal(['NodeFeature', 'NodeResourceTopology'])
    expect(gcKinds.map((k) => k.kind)).to.deep.equal(gcKindNames)
  })

  it('names each CRD as plural.group', () => {
    for (const k of gcKinds) expect(k.crd).to.equal(`${k.resource.plural}.${k.resource.group}`)
  })

  it('has NodeFeature namespaced and NodeResourceTopology cluster-scoped', () => {
    expect(findGcKind('NodeFeature')?.resource).to.deep.equal({group: 'nfd.k8s-sigs.io', namespaced: true, plural: 'nodefeatures', version: 'v1alpha1'})
    expect(findGcKind('NodeResourceTopology')?.resource).to.deep.equal({
      group: 'topology.node.k8s.io',
      namespaced: false,
      plural: 'noderesourcetopologies',
      version: 'v1alpha2',
    })
  })

  describe('findGcKind', () => {
    const cases: Array<[input: string, kind: string | undefined]> = [
      ['NodeFeature', 'NodeFeature'],
      ['nodefeature', 'NodeFeature'],
      ['NODEFEATURE', 'NodeFeature'],
      ['nodefeatures', 'NodeFeature'],
      ['NodeFeatures', 'NodeFeature'],
      ['nodefeatures.nfd.k8s-sigs.io', 'NodeFeature'],
      ['NodeFeatures.NFD.k8s-sigs.io', 'NodeFeature'],
      ['  NodeFeature  ', 'NodeFeature'],
      ['NodeResourceTopology', 'NodeResourceTopology'],
      ['noderesourcetopology', 'NodeResourceTopology'],
      ['noderesourcetopologies', 'NodeResourceTopology'],
      ['NodeResourceTopologies', 'NodeResourceTopology'],
      ['noderesourcetopologies.topology.node.k8s.io', 'NodeResourceTopology'],
      ['Foo', undefined],
      ['', undefined],
      ['node', undefined],
      ['nodes', undefined],
      ['nfd.k8s-sigs.io', undefined],
      ['nodefeatures.nfd.k8s-sigs.io/v1alpha1', undefined],
      ['NodeFeatureRule', undefined],
    ]
    for (const [input, kind] of cases) {
      it(`${JSON.stringify(input)} -> ${kind ?? 'undefined'}`, () => {
        expect(findGcKind(input)?.kind).to.equal(kind)
      })
    }

    it('returns the registry object itself', () => {
      expect(findGcKind('nodefeatures')).to.equal(gcKinds[0])
      expect(findGcKind('noderesourcetopologies')).to.equal(gcKinds[1])
    })
  })

  describe('nodeOf', () => {
    const nodeFeature = findGcKind('NodeFeature')!
    const topology = findGcKind('NodeResourceTopology')!
    const meta = (extra: Partial<ObjectMeta>): ObjectMeta => ({name: 'obj', uid: 'u1', ...extra})

    const cases: Array<{title: string; kind: typeof nodeFeature; meta: ObjectMeta; node: string | undefined}> = [
      {kind: nodeFeature, meta: meta({labels: {[nodeNameLabel]: 'worker-1'}, name: 'nf-x'}), node: 'worker-1', title: 'NodeFeature: the node-name label'},
      {kind: nodeFeature, meta: meta({name: 'worker-1'}), node: undefined, title: 'NodeFeature: no labels at all -> undefined (not the name)'},
      {kind: nodeFeature, meta: meta({labels: {}}), node: undefined, title: 'NodeFeature: empty labels -> undefined'},
      {kind: nodeFeature, meta: meta({labels: {[nodeNameLabel]: ''}}), node: undefined, title: 'NodeFeature: empty label value -> undefined'},
      {kind: nodeFeature, meta: meta({labels: {'kubernetes.io/hostname': 'worker-1'}}), node: undefined, title: 'NodeFeature: other labels only -> undefined'},
      {kind: topology, meta: meta({name: 'worker-2'}), node: 'worker-2', title: 'NodeResourceTopology: its name'},
      {kind: topology, meta: meta({labels: {[nodeNameLabel]: 'worker-9'}, name: 'worker-2'}), node: 'worker-2', title: 'NodeResourceTopology: its name even with a node-name label'},
    ]
    for (const c of cases) {
      it(c.title, () => {
        expect(c.kind.nodeOf(c.meta)).to.equal(c.node)
      })
    }
  })
})
