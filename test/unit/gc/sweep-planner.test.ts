import {expect} from 'chai'

import {gcKinds, nodeNameLabel, type GcKind} from '../../../src/lib/gc/kinds.js'
import {judgeObject, planSweep, staleReasonText, type ObservedObject, type PlanOptions, type SweepPlan} from '../../../src/lib/gc/sweep-planner.js'

const nodeFeatureKind: GcKind = gcKinds.find((k) => k.kind === 'NodeFeature')!
const topologyKind: GcKind = gcKinds.find((k) => k.kind === 'NodeResourceTopology')!

let uid = 0
function nodeFeature(name: string, node: string | undefined, namespace = 'nfd'): ObservedObject {
  const labels = node === undefined ? undefined : {[nodeNameLabel]: node}
  return {kind: nodeFeatureKind, meta: {labels, name, namespace, uid: `uid-${++uid}`}}
}

function topology(name: string): ObservedObject {
  return {kind: topologyKind, meta: {name, uid: `uid-${++uid}`}}
}

/** Lenient options so that only the behaviour a test looks at can refuse. */
const lenient: PlanOptions = {allowEmptyNodes: false, force: false, keepUnlabelled: false, maxDeleteRatio: 1}

function staleNames(plan: SweepPlan): string[] {
  return plan.stale.map((s) => s.meta.name)
}

function refusalOf(plan: SweepPlan): string {
  expect(plan.action).to.equal('refuse')
  return plan.action === 'refuse' ? plan.reason : ''
}

describe('planSweep', () => {
  describe('which objects are stale', () => {
    const cases: Array<{
      title: string
      objects: ObservedObject[]
      nodes: string[]
      options?: Partial<PlanOptions>
      stale: Array<{name: string; node?: string; reason: string}>
    }> = [
      {
        nodes: ['n1', 'n2'],
        objects: [nodeFeature('nf-a', 'n1'), nodeFeature('nf-b', 'n2')],
        stale: [],
        title: 'keeps NodeFeatures whose node exists',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-a', 'n1'), nodeFeature('nf-gone', 'n9')],
        stale: [{name: 'nf-gone', node: 'n9', reason: 'node-gone'}],
        title: 'marks a NodeFeature stale when its labelled node is missing',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('n9', 'n1')],
        stale: [],
        title: 'judges a NodeFeature by its label, not by its name',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('n1', 'n9')],
        stale: [{name: 'n1', node: 'n9', reason: 'node-gone'}],
        title: 'marks a NodeFeature named after a live node stale when its label names a missing one',
      },
      {
        nodes: ['n1', 'n2'],
        objects: [topology('n1'), topology('n3')],
        stale: [{name: 'n3', node: 'n3', reason: 'node-gone'}],
        title: 'judges a NodeResourceTopology by its name',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-unlabelled', undefined)],
        stale: [{name: 'nf-unlabelled', node: undefined, reason: 'no-node-label'}],
        title: "marks an unlabelled NodeFeature stale with reason 'no-node-label'",
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-unlabelled', undefined)],
        options: {keepUnlabelled: true},
        stale: [],
        title: 'keeps an unlabelled NodeFeature with keepUnlabelled',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-empty', '')],
        stale: [{name: 'nf-empty', node: undefined, reason: 'no-node-label'}],
        title: 'treats an empty node-name label value as unlabelled',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-empty', '')],
        options: {keepUnlabelled: true},
        stale: [],
        title: 'keeps an empty-labelled NodeFeature with keepUnlabelled',
      },
      {
        nodes: ['n1'],
        objects: [{kind: nodeFeatureKind, meta: {labels: {other: 'n9'}, name: 'nf-other-label', namespace: 'nfd', uid: 'u-other'}}],
        stale: [{name: 'nf-other-label', node: undefined, reason: 'no-node-label'}],
        title: 'treats a NodeFeature with only unrelated labels as unlabelled',
      },
      {
        nodes: ['n1'],
        objects: [nodeFeature('nf-gone', 'n9'), nodeFeature('nf-unlabelled', undefined)],
        options: {keepUnlabelled: true},
        stale: [{name: 'nf-gone', node: 'n9', reason: 'node-gone'}],
        title: 'keepUnlabelled does not spare a NodeFeature whose node is gone',
      },
      {
        nodes: ['N1'],
        objects: [nodeFeature('nf-a', 'n1')],
        stale: [{name: 'nf-a', node: 'n1', reason: 'node-gone'}],
        title: 'compares node names exactly (case-sensitive)',
      },
      {
        nodes: ['n1', 'n2'],
        objects: [topology('n3'), nodeFeature('nf-a', 'n1'), nodeFeature('nf-b', undefined), topology('n2'), nodeFeature('nf-c', 'n4')],
        stale: [
          {name: 'n3', node: 'n3', reason: 'node-gone'},
          {name: 'nf-b', node: undefined, reason: 'no-node-label'},
          {name: 'nf-c', node: 'n4', reason: 'node-gone'},
        ],
        title: 'mixes kinds and keeps the order the objects were observed in',
      },
      {
        nodes: ['n1'],
        objects: [],
        stale: [],
        title: 'returns nothing stale for no objects',
      },
    ]

    for (const c of cases) {
      it(c.title, () => {
        const plan = planSweep({nodes: new Set(c.nodes), objects: c.objects}, {...lenient, ...c.options})
        expect(plan.action).to.equal('delete')
        expect(plan.stale.map((s) => ({name: s.meta.name, node: s.node, reason: s.reason}))).to.deep.equal(c.stale)
      })
    }

    it('carries the observed kind and metadata through to each stale object', () => {
      const gone = nodeFeature('nf-gone', 'n9', 'other-ns')
      const plan = planSweep({nodes: new Set(['n1']), objects: [gone]}, lenient)
      expect(plan.stale).to.have.length(1)
      expect(plan.stale[0].kind).to.equal(nodeFeatureKind)
      expect(plan.stale[0].meta).to.deep.equal(gone.meta)
    })

    it('has a human text for every stale reason', () => {
      expect(staleReasonText['no-node-label']).to.include(nodeNameLabel)
      expect(staleReasonText['node-gone']).to.be.a('string').and.not.be.empty
    })
  })

  describe('an empty node list', () => {
    it('refuses when there are stale objects and allowEmptyNodes is off', () => {
      const objects = [nodeFeature('nf-a', 'n1'), topology('n2')]
      const plan = planSweep({nodes: new Set(), objects}, lenient)
      const reason = refusalOf(plan)
      expect(reason).to.include('--allow-empty-nodes')
      expect(reason).to.include('all 2 objects')
    })

    it('still lists the stale objects when refusing', () => {
      const plan = planSweep({nodes: new Set(), objects: [nodeFeature('nf-a', 'n1'), topology('n2')]}, lenient)
      expect(plan.action).to.equal('refuse')
      expect(staleNames(plan)).to.deep.equal(['nf-a', 'n2'])
    })

    it('is not refused when there are no stale objects at all', () => {
      const plan = planSweep({nodes: new Set(), objects: []}, lenient)
      expect(plan).to.deep.equal({action: 'delete', stale: []})
    })

    it('is not refused when every object is an unlabelled NodeFeature kept by keepUnlabelled', () => {
      const plan = planSweep({nodes: new Set(), objects: [nodeFeature('nf-u', undefined)]}, {...lenient, keepUnlabelled: true})
      expect(plan).to.deep.equal({action: 'delete', stale: []})
    })

    it('deletes everything with allowEmptyNodes (and a ratio that allows it)', () => {
      const plan = planSweep({nodes: new Set(), objects: [nodeFeature('nf-a', 'n1'), topology('n2')]}, {...lenient, allowEmptyNodes: true})
      expect(plan.action).to.equal('delete')
      expect(staleNames(plan)).to.deep.equal(['nf-a', 'n2'])
    })

    it('with allowEmptyNodes still applies --max-delete-ratio', () => {
      const plan = planSweep({nodes: new Set(), objects: [nodeFeature('nf-a', 'n1'), topology('n2')]}, {...lenient, allowEmptyNodes: true, maxDeleteRatio: 0.5})
      expect(refusalOf(plan)).to.include('--max-delete-ratio')
    })

    it('force alone does not override the empty-node refusal', () => {
      const plan = planSweep({nodes: new Set(), objects: [nodeFeature('nf-a', 'n1')]}, {...lenient, force: true})
      expect(refusalOf(plan)).to.include('--allow-empty-nodes')
    })
  })

  describe('--max-delete-ratio', () => {
    /**
     * `total` NodeResourceTopologies of which the first `stale` name missing nodes. One extra Node without
     * objects keeps the node list non-empty, so the empty-node guard never decides these cases.
     */
    function view(total: number, stale: number) {
      const objects = Array.from({length: total}, (_, i) => topology(i < stale ? `gone-${i}` : `live-${i}`))
      const nodes = new Set(['node-without-objects', ...Array.from({length: total - stale}, (_, i) => `live-${stale + i}`)])
      return {nodes, objects}
    }

    const cases: Array<{title: string; total: number; stale: number; ratio: number; force?: boolean; action: 'delete' | 'refuse'}> = [
      {action: 'delete', ratio: 0.5, stale: 2, title: 'allows exactly the ratio (2 of 4 at 0.5)', total: 4},
      {action: 'refuse', ratio: 0.5, stale: 3, title: 'refuses just above the ratio (3 of 4 at 0.5)', total: 4},
      {action: 'delete', ratio: 0.25, stale: 1, title: 'allows exactly the ratio (1 of 4 at 0.25)', total: 4},
      {action: 'refuse', ratio: 0.24, stale: 1, title: 'refuses when the ratio is just below the stale share (1 of 4 at 0.24)', total: 4},
      {action: 'delete', ratio: 0.1, stale: 1, title: 'allows exactly the ratio (1 of 10 at 0.1)', total: 10},
      {action: 'refuse', ratio: 0.1, stale: 2, title: 'refuses just above the ratio (2 of 10 at 0.1)', total: 10},
      {action: 'delete', ratio: 0.3, stale: 3, title: 'allows exactly the ratio (3 of 10 at 0.3)', total: 10},
      {action: 'delete', ratio: 1, stale: 5, title: 'allows everything at ratio 1', total: 5},
      {action: 'refuse', ratio: 0, stale: 1, title: 'refuses any deletion at ratio 0', total: 100},
      {action: 'delete', force: true, ratio: 0, stale: 3, title: 'force overrides ratio 0', total: 4},
      {action: 'delete', force: true, ratio: 0.5, stale: 4, title: 'force overrides the ratio when everything is stale', total: 4},
      // Regression: 0.29 * 100 is 28.999999999999996 in floating point, yet 29 of 100 is exactly the ratio asked for.
      {action: 'delete', ratio: 0.29, stale: 29, title: 'allows exactly the ratio despite floating-point rounding (29 of 100 at 0.29)', total: 100},
      {action: 'delete', ratio: 0.57, stale: 57, title: 'allows exactly the ratio despite floating-point rounding (57 of 100 at 0.57)', total: 100},
    ]

    for (const c of cases) {
      it(c.title, () => {
        const plan = planSweep(view(c.total, c.stale), {...lenient, force: c.force ?? false, maxDeleteRatio: c.ratio})
        expect(plan.action).to.equal(c.action)
        expect(plan.stale).to.have.length(c.stale)
      })
    }

    it('still lists the stale objects when refusing', () => {
      const plan = planSweep(view(4, 3), {...lenient, maxDeleteRatio: 0.5})
      expect(plan.action).to.equal('refuse')
      expect(staleNames(plan)).to.deep.equal(['gone-0', 'gone-1', 'gone-2'])
    })

    it('explains the refusal with counts, percentage and the flags to use', () => {
      const reason = refusalOf(planSweep(view(4, 3), {...lenient, maxDeleteRatio: 0.5}))
      expect(reason).to.include('3 of 4 objects (75%)')
      expect(reason).to.include('--max-delete-ratio 0.5')
      expect(reason).to.include('--force')
    })

    it('rounds the percentage in the refusal', () => {
      const reason = refusalOf(planSweep(view(3, 2), {...lenient, maxDeleteRatio: 0.5}))
      expect(reason).to.include('2 of 3 objects (67%)')
    })

    it('counts unlabelled NodeFeatures kept by keepUnlabelled as scanned but not stale', () => {
      const objects = [nodeFeature('nf-gone', 'n9'), nodeFeature('nf-u1', undefined), nodeFeature('nf-u2', undefined), nodeFeature('nf-live', 'n1')]
      const plan = planSweep({nodes: new Set(['n1']), objects}, {...lenient, keepUnlabelled: true, maxDeleteRatio: 0.25})
      expect(plan.action).to.equal('delete')
      expect(staleNames(plan)).to.deep.equal(['nf-gone'])
    })
  })
})

describe('judgeObject (the verdict a changed object gets again at deletion time)', () => {
  const live = new Set(['alive'])
  const cases: Array<{title: string; object: ObservedObject; keepUnlabelled: boolean; want: string | undefined}> = [
    {keepUnlabelled: false, object: nodeFeature('a', 'alive'), title: 'a NodeFeature re-labelled to a live node is not stale', want: undefined},
    {keepUnlabelled: false, object: nodeFeature('a', 'other-gone'), title: 'a NodeFeature re-labelled to another gone node is still stale', want: 'node-gone'},
    {keepUnlabelled: false, object: nodeFeature('a', undefined), title: 'a NodeFeature that lost its label is stale without --keep-unlabelled', want: 'no-node-label'},
    {keepUnlabelled: true, object: nodeFeature('a', undefined), title: 'a NodeFeature that lost its label is kept with --keep-unlabelled', want: undefined},
    {keepUnlabelled: false, object: nodeFeature('a', ''), title: 'an empty label names no node', want: 'no-node-label'},
    {keepUnlabelled: false, object: topology('alive'), title: 'a topology named after a live node is not stale', want: undefined},
    {keepUnlabelled: true, object: topology('gone'), title: 'a topology of a gone node is stale whatever --keep-unlabelled says', want: 'node-gone'},
  ]
  for (const c of cases) {
    it(c.title, () => {
      expect(judgeObject(c.object, live, c.keepUnlabelled)?.reason).to.equal(c.want)
    })
  }

  it('agrees with planSweep on every object', () => {
    const objects = [nodeFeature('x', 'alive'), nodeFeature('y', 'gone'), nodeFeature('z', undefined), topology('alive'), topology('gone')]
    const planned = staleNames(planSweep({nodes: live, objects}, lenient))
    expect(objects.filter((o) => judgeObject(o, live, false) !== undefined).map((o) => o.meta.name)).to.deep.equal(planned)
  })
})
