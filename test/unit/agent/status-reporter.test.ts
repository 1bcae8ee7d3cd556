import {expect} from 'chai'

import {classReports} from '../../../src/lib/agent/status-reporter.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const loop3 = loopDevice(3)
const loopClass = {...deviceClass('loop'), metadata: {generation: 4, name: 'loop'}}

describe('classReports', function () {
  it("reports the node's devices and how many containers hold each class in use (no names), with a Valid condition", function () {
    const reports = classReports('worker-1', {
      classes: new Map([['loop', loopClass]]),
      holding: new Map([['loop', 2]]),
      invalid: [],
      members: new Map([['loop', [loop3]]]),
    })
    expect(reports.get('loop')).to.deep.equal({
      condition: {generation: 4, message: 'the spec is valid and in use on node worker-1', valid: true},
      entry: {devices: [{devName: 'loop3', id: 'b7:3', major: 7, minor: 3}], holders: 2, node: 'worker-1', observedGeneration: 4},
    })
  })

  it("lists the devices a class matches but does not serve in the node's entry, with reason and message", function () {
    const twin = (minor: number) => loopDevice(minor, {ID_PATH: 'hub-1'})
    const refusal = (minor: number) => ({className: 'loop', device: twin(minor), message: `m${minor}`, reason: 'DuplicateIdentity' as const})
    const reports = classReports('worker-1', {
      classes: new Map([['loop', loopClass]]),
      holding: new Map(),
      invalid: [],
      members: new Map([['loop', [loop3]]]),
      refused: [refusal(5), refusal(4), {...refusal(6), className: 'other'}],
    })
    expect(reports.get('loop')?.entry?.refused).to.deep.equal([
      {devName: 'loop4', id: 'b7:4', message: 'm4', reason: 'DuplicateIdentity'},
      {devName: 'loop5', id: 'b7:5', message: 'm5', reason: 'DuplicateIdentity'},
    ])
    expect(classReports('worker-1', {classes: new Map([['loop', loopClass]]), holding: new Map(), invalid: [], members: new Map()}).get('loop')?.entry).to.not.have.property('refused')
  })

  it('an invalid new spec keeps the entry of the generation still in use and says so; one never valid is not served', function () {
    const reports = classReports('worker-1', {
      classes: new Map([['loop', loopClass]]),
      holding: new Map(),
      invalid: [
        {generation: 5, message: 'spec.capacity: must be at least 1', name: 'loop', using: 4},
        {generation: 1, message: 'spec.match: required', name: 'broken'},
      ],
      members: new Map(),
    })
    expect(reports.get('loop')?.entry?.observedGeneration).to.equal(4)
    expect(reports.get('loop')?.entry?.holders).to.equal(0)
    expect(reports.get('loop')?.condition).to.deep.equal({generation: 5, message: 'invalid spec: spec.capacity: must be at least 1; generation 4, the last valid one, stays in use', valid: false})
    expect(reports.get('broken')).to.deep.equal({condition: {generation: 1, message: 'invalid spec: spec.match: required; the class is not served', valid: false}})
  })

  it('a DRA class gets a condition per feature the API server drops; a Device class and a cluster dropping nothing get none', function () {
    const draClass = {...loopClass, spec: {...loopClass.spec, allocation: 'DRA' as const}}
    const seen = {
      classes: new Map([
        ['loop', loopClass],
        ['dra', {...draClass, metadata: {generation: 1, name: 'dra'}}],
      ]),
      holding: new Map(),
      invalid: [],
      members: new Map(),
    }
    const dropping = classReports('worker-1', {...seen, dropped: {extendedResourceName: true, taints: false}})
    expect(dropping.get('dra')?.dropped?.map((c) => [c.type, c.status, c.reason])).to.deep.equal([['LimitRequestsServed', 'False', 'ExtendedResourceDropped']])
    expect(dropping.get('loop')).to.not.have.property('dropped')
    expect(classReports('worker-1', {...seen, dropped: {extendedResourceName: false, taints: false}}).get('dra')).to.not.have.property('dropped')
    expect(classReports('worker-1', seen).get('dra')).to.not.have.property('dropped')
  })

  it("the runtime's problem goes into a DRA class's node entry, never a Device class's", function () {
    const draClass = {...loopClass, metadata: {generation: 1, name: 'dra'}, spec: {...loopClass.spec, allocation: 'DRA' as const}}
    const seen = {
      classes: new Map([
        ['loop', loopClass],
        ['dra', draClass],
      ]),
      holding: new Map(),
      invalid: [],
      members: new Map(),
    }
    const reports = classReports('worker-1', {...seen, runtimeProblem: 'the container runtime has CDI off'})
    expect(reports.get('dra')?.entry?.problems).to.deep.equal([{message: 'the container runtime has CDI off', reason: 'RuntimeWithoutCDI'}])
    expect(reports.get('loop')?.entry).to.not.have.property('problems')
    expect(classReports('worker-1', seen).get('dra')?.entry).to.not.have.property('problems')
  })
})
