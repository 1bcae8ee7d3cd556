import {expect} from 'chai'
import {Registry} from 'prom-client'

import {createAgentMetrics} from '../../../src/lib/agent/agent-metrics.js'
import type {ObjectRef, PodEvents} from '../../../src/lib/agent/pod-events.js'
import {RefusalNotices} from '../../../src/lib/agent/refusal-notices.js'
import {noneDropped} from '../../../src/lib/devices/dropped-features.js'
import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {deviceClass} from '../../support/device-class.js'

describe('RefusalNotices.tellDropped', function () {
  const told: Array<{object: ObjectRef; reason: string}> = []
  const events = {warnAbout: (object: ObjectRef, reason: string) => void told.push({object, reason})} as unknown as PodEvents
  const fpga = {...deviceClass('fpga', {allocation: 'DRA'}), metadata: {name: 'fpga', uid: 'u-fpga'}}
  const classes = new Map<string, DeviceClass>([
    ['fpga', fpga],
    ['serial', deviceClass('serial')],
  ])
  const both = {extendedResourceName: true, taints: true}

  beforeEach(() => void told.splice(0))

  it('one Event per dropped feature on each DRA class (none on a class the driver does not serve), once while it lasts', function () {
    const notices = new RefusalNotices({events, logger: noopLogger, metrics: createAgentMetrics(new Registry())})
    notices.tellDropped(both, classes)
    expect(told.map((t) => [t.object.name, t.object.kind, t.object.uid, t.reason])).to.deep.equal([
      ['fpga', 'DeviceClass', 'u-fpga', 'ExtendedResourceDropped'],
      ['fpga', 'DeviceClass', 'u-fpga', 'DeviceTaintsDropped'],
    ])
    notices.tellDropped(both, classes)
    expect(told).to.have.lengthOf(2)
  })

  it('tells again once it ended and came back, and tells a class that becomes DRA', function () {
    const notices = new RefusalNotices({events, logger: noopLogger, metrics: createAgentMetrics(new Registry())})
    notices.tellDropped({extendedResourceName: true, taints: false}, classes)
    notices.tellDropped(noneDropped, classes)
    notices.tellDropped({extendedResourceName: true, taints: false}, classes)
    notices.tellDropped({extendedResourceName: true, taints: false}, new Map([...classes, ['serial', deviceClass('serial', {allocation: 'DRA'})]]))
    expect(told.map((t) => `${t.object.name}/${t.reason}`)).to.deep.equal(['fpga/ExtendedResourceDropped', 'fpga/ExtendedResourceDropped', 'serial/ExtendedResourceDropped'])
  })
})

describe('RefusalNotices.tellRuntime', function () {
  it('an Event RuntimeWithoutCDI on each DRA class, once while the problem lasts, again when it comes back', function () {
    const told: Array<{name: string; reason: string; message: string}> = []
    const events = {warnAbout: (object: ObjectRef, reason: string, message: string) => void told.push({message, name: object.name, reason})} as unknown as PodEvents
    const classes = new Map<string, DeviceClass>([
      ['fpga', deviceClass('fpga', {allocation: 'DRA'})],
      ['serial', deviceClass('serial')],
    ])
    const notices = new RefusalNotices({events, logger: noopLogger, metrics: createAgentMetrics(new Registry())})
    notices.tellRuntime('CDI off', classes)
    notices.tellRuntime('CDI off', classes)
    expect(told).to.deep.equal([{message: 'CDI off', name: 'fpga', reason: 'RuntimeWithoutCDI'}])
    notices.tellRuntime(undefined, classes)
    notices.tellRuntime('CDI off', classes)
    expect(told).to.have.lengthOf(2)
  })
})
