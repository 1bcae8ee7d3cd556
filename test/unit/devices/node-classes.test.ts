import {expect} from 'chai'

import {classesForNode} from '../../../src/lib/devices/node-classes.js'
import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {deviceClass as anyClass} from '../../support/device-class.js'

const deviceClass = (name: string, nodeSelector?: DeviceClass['spec']['nodeSelector'], devName = 'tty*'): DeviceClass => anyClass(name, {match: [{devName, subsystem: 'tty'}], nodeSelector})

const names = (classes: readonly DeviceClass[]): string[] => classes.map((c) => c.metadata.name)

describe('classesForNode', () => {
  const classes = [
    deviceClass('everywhere'),
    deviceClass('edge-only', {matchLabels: {'node-role.kubernetes.io/edge': ''}}),
    deviceClass('not-gpu', {matchExpressions: [{key: 'gpu', operator: 'DoesNotExist'}]}),
    deviceClass('zones', {matchExpressions: [{key: 'zone', operator: 'In', values: ['a', 'b']}]}),
  ]
  const applicable = (labels: Record<string, string>): string[] => names(classesForNode([], classes, labels).applicable)

  it('a class without nodeSelector applies to every node', () => {
    expect(applicable({})).to.include('everywhere')
  })

  it('matchLabels and matchExpressions select nodes', () => {
    expect(applicable({'node-role.kubernetes.io/edge': '', zone: 'b'})).to.deep.equal(['everywhere', 'edge-only', 'not-gpu', 'zones'])
    expect(applicable({gpu: 'true', zone: 'c'})).to.deep.equal(['everywhere'])
  })

  it("puts class files first, and a cluster class of the same name in the place of the file's", () => {
    const files = [deviceClass('own'), deviceClass('shared', undefined, 'file*')]
    const cluster = [deviceClass('shared', {matchLabels: {site: 'lab'}}, 'cluster*'), deviceClass('remote')]
    const {all, applicable: here} = classesForNode(files, cluster, {site: 'lab'})
    expect(names(all)).to.deep.equal(['own', 'shared', 'remote'])
    expect(all[1].spec.match[0].devName).to.equal('cluster*')
    expect(names(here)).to.deep.equal(['own', 'shared', 'remote'])
    expect(names(classesForNode(files, cluster, {}).applicable)).to.deep.equal(['own', 'remote'])
  })
})
