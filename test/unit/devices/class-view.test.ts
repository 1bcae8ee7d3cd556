import {expect} from 'chai'

import {classView} from '../../../src/lib/devices/class-view.js'
import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {deviceClass} from '../../support/device-class.js'

const item = (name: string, generation: number, spec: object): object => ({metadata: {generation, name, uid: `uid-${name}`}, spec})
const valid = (name: string, generation = 1, extra: object = {}): object => item(name, generation, {match: [{devName: `${name}*`, subsystem: 'block'}], ...extra})
const names = (classes: readonly DeviceClass[]): string[] => classes.map((c) => c.metadata.name)

describe('classView: the classes a node uses', function () {
  it('keeps valid classes whose nodeSelector selects the node, with defaults applied and the generation kept', function () {
    const {lastValid, view} = classView({
      clusterItems: [valid('a'), valid('b', 1, {nodeSelector: {matchLabels: {gpu: 'yes'}}}), valid('c', 4, {nodeSelector: {matchLabels: {gpu: 'no'}}})],
      fileClasses: [],
      lastValid: new Map(),
      nodeLabels: {gpu: 'yes'},
    })
    expect(names(view.applicable)).to.deep.equal(['a', 'b'])
    expect(view.applicable[0].spec).to.include({allocation: 'Class', capacity: 1, permissions: 'rw'})
    expect(view.invalid).to.deep.equal([])
    // Valid but not for this node: still remembered as valid (a label change may select it).
    expect(lastValid.get('c')?.metadata.generation).to.equal(4)
  })

  it('reports a class that was never valid and does not serve it; the others are untouched', function () {
    const {view} = classView({clusterItems: [item('broken', 2, {match: [{devName: 'loop[', subsystem: 'block'}]}), valid('ok')], fileClasses: [], lastValid: new Map(), nodeLabels: {}})
    expect(names(view.applicable)).to.deep.equal(['ok'])
    expect(view.invalid).to.have.length(1)
    expect(view.invalid[0]).to.include({generation: 2, name: 'broken', using: undefined})
    expect(view.invalid[0].message).to.match(/^spec\.match\[0\]\.devName: /)
  })

  it('keeps the last valid spec of a class whose edit made it invalid, and says which generation stays in use', function () {
    const first = classView({clusterItems: [valid('a', 3)], fileClasses: [], lastValid: new Map(), nodeLabels: {}})
    const edited = classView({clusterItems: [item('a', 4, {match: [{devName: 'a*', subsystem: 'block'}], permissions: 'rwx'})], fileClasses: [], lastValid: first.lastValid, nodeLabels: {}})
    expect(edited.view.applicable.map((c) => [c.metadata.name, c.metadata.generation, c.spec.permissions])).to.deep.equal([['a', 3, 'rw']])
    expect(edited.view.invalid.map((p) => [p.name, p.generation, p.using])).to.deep.equal([['a', 4, 3]])
    // Fixed again: the new spec, and no problem.
    const fixed = classView({clusterItems: [valid('a', 5, {permissions: 'r'})], fileClasses: [], lastValid: edited.lastValid, nodeLabels: {}})
    expect(fixed.view.applicable.map((c) => [c.metadata.generation, c.spec.permissions])).to.deep.equal([[5, 'r']])
    expect(fixed.view.invalid).to.deep.equal([])
  })

  it('forgets a class deleted from the cluster, even one it kept the last valid spec of', function () {
    const first = classView({clusterItems: [valid('a'), valid('b')], fileClasses: [], lastValid: new Map(), nodeLabels: {}})
    const after = classView({clusterItems: [valid('b')], fileClasses: [], lastValid: first.lastValid, nodeLabels: {}})
    expect(names(after.view.applicable)).to.deep.equal(['b'])
    expect([...after.lastValid.keys()]).to.deep.equal(['b'])
  })

  it("puts class files first, and a cluster class of the same name in the place of the file's", function () {
    const fromFile = (name: string, devName: string): DeviceClass => deviceClass(name, {match: [{devName, subsystem: 'block'}]})
    const {view} = classView({clusterItems: [valid('shared')], fileClasses: [fromFile('own', 'own*'), fromFile('shared', 'file*')], lastValid: new Map(), nodeLabels: {}})
    expect(names(view.applicable)).to.deep.equal(['own', 'shared'])
    expect(view.applicable[1].spec.match[0].devName).to.equal('shared*')
  })
})
