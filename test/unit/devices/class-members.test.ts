import {expect} from 'chai'

import {ClassMembers} from '../../../src/lib/devices/class-members.js'
import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const classOf = (name: string, devName: string): DeviceClass => deviceClass(name, {match: [{devName, subsystem: 'block'}]})
const noAttributes = (): undefined => undefined

describe('ClassMembers', function () {
  it('places each device in the classes it matches, and says which classes an event touched', function () {
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]'), classOf('all', 'loop*')])
    expect([...members.deviceEvent('add', loop(1))]).to.deep.equal(['low', 'all'])
    expect([...members.deviceEvent('add', loop(7))]).to.deep.equal(['all'])
    expect(members.of('low').map((d) => d.id)).to.deep.equal(['b7:1'])
    expect([...members.all()].map(([name, devices]) => [name, devices.length])).to.deep.equal([
      ['low', 1],
      ['all', 2],
    ])
  })

  it('a change that leaves the device as it was changes no class; one that changes it changes its classes', function () {
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]')])
    members.deviceEvent('add', loop(1))
    expect([...members.deviceEvent('change', loop(1))]).to.deep.equal([])
    expect([...members.deviceEvent('change', {...loop(1), properties: {ID_SERIAL: 'new'}})]).to.deep.equal(['low'])
    expect(members.of('low')[0].properties).to.deep.equal({ID_SERIAL: 'new'})
  })

  it('a removed device leaves the classes it was in, and stays known as a class device', function () {
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]')])
    members.deviceEvent('add', loop(1))
    expect([...members.deviceEvent('remove', loop(1))]).to.deep.equal(['low'])
    expect(members.of('low')).to.deep.equal([])
    expect(members.known('b7:1')?.devNode).to.equal('/dev/loop1')
    expect([...members.deviceEvent('add', loop(9))]).to.deep.equal([])
    expect(members.known('b7:9')).to.equal(undefined)
  })

  it('new classes place every present device again, those in no class before included', function () {
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]')])
    members.deviceEvent('add', loop(1))
    members.deviceEvent('add', loop(8))
    members.setClasses([classOf('high', 'loop[5-9]')])
    expect(members.classNames).to.deep.equal(['high'])
    expect(members.of('high').map((d) => d.id)).to.deep.equal(['b7:8'])
    expect(members.of('low')).to.deep.equal([])
    expect(members.known('b7:8')?.devName).to.equal('loop8')
  })
})

describe('ClassMembers refusals', function () {
  it('a device joining a Device class that overlaps a Class class leaves both, and both are touched; its removal frees it', function () {
    const members = new ClassMembers(noAttributes, [classOf('shared', 'loop*'), deviceClass('units', {allocation: 'Device', match: [{devName: 'loop[0-4]', subsystem: 'block'}]})])
    expect([...members.deviceEvent('add', loop(7))]).to.deep.equal(['shared'])
    expect([...members.deviceEvent('add', loop(1))].sort()).to.deep.equal(['shared', 'units'])
    expect(members.of('shared').map((d) => d.id)).to.deep.equal(['b7:7'])
    expect(members.of('units')).to.deep.equal([])
    expect(members.refusals().map((r) => `${r.className} ${r.device.id} ${r.reason}`)).to.deep.equal(['shared b7:1 ExclusiveOverlap', 'units b7:1 ExclusiveOverlap'])
    // Still a class device: the agent takes it back from whoever held it.
    expect(members.known('b7:1')?.devNode).to.equal('/dev/loop1')
    members.deviceEvent('remove', loop(1))
    expect(members.refusals()).to.deep.equal([])
  })

  it('a second device with one identity touches the class and refuses the first; unplugging it serves the first again', function () {
    const twin = (minor: number) => loop(minor, {ID_PATH: 'platform-hub-1'})
    const members = new ClassMembers(noAttributes, [deviceClass('disks', {allocation: 'Device', match: [{subsystem: 'block'}]})])
    members.deviceEvent('add', twin(1))
    expect(members.of('disks').map((d) => d.id)).to.deep.equal(['b7:1'])
    expect([...members.deviceEvent('add', twin(2))]).to.deep.equal(['disks'])
    expect(members.of('disks')).to.deep.equal([])
    expect(members.refusals()).to.have.length(2)
    expect([...members.deviceEvent('remove', twin(2))]).to.deep.equal(['disks'])
    expect(members.of('disks').map((d) => d.id)).to.deep.equal(['b7:1'])
  })
})

describe("ClassMembers and the node's mounts", function () {
  it('hostChanged judges every class again: a device the node mounts leaves the classes it was served by, and comes back when unmounted', function () {
    const mounted = new Map<string, string>()
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]'), classOf('high', 'loop[5-9]')], {
      refuse: (device) => (mounted.has(device.id) ? {message: mounted.get(device.id)!, reason: 'HostCritical'} : undefined),
    })
    members.deviceEvent('add', loop(1))
    members.deviceEvent('add', loop(2))
    members.deviceEvent('add', loop(7))
    const generation = members.generation
    expect([...members.hostChanged()], 'nothing mounted yet').to.deep.equal([])
    expect(members.generation).to.equal(generation)
    mounted.set('b7:2', "/dev/loop2 backs the node's mount /data")
    expect([...members.hostChanged()]).to.deep.equal(['low'])
    expect(members.generation).to.be.greaterThan(generation)
    expect(members.of('low').map((d) => d.id)).to.deep.equal(['b7:1'])
    expect(members.refusals().map((r) => `${r.className} ${r.device.id} ${r.reason}: ${r.message}`)).to.deep.equal(["low b7:2 HostCritical: /dev/loop2 backs the node's mount /data"])
    mounted.clear()
    expect([...members.hostChanged()]).to.deep.equal(['low'])
    expect(members.of('low').map((d) => d.id)).to.deep.equal(['b7:1', 'b7:2'])
    expect(members.refusals()).to.deep.equal([])
  })
})

describe('ClassMembers known numbers', function () {
  it('remembers numbers from before (known, in no class), tells each device that joins or leaves a class with the classes it is in', function () {
    const told: string[] = []
    const members = new ClassMembers(noAttributes, [classOf('low', 'loop[0-4]'), classOf('one', 'loop1')], {onKnown: (d, classes) => told.push(`${d.id} ${classes.join(',')}`)})
    members.remember([{...loop(3), devPath: ''}])
    expect(members.known('b7:3')?.devNode).to.equal('/dev/loop3')
    expect(members.of('low')).to.deep.equal([])
    members.deviceEvent('add', loop(1))
    members.deviceEvent('add', loop(9))
    members.deviceEvent('remove', loop(1))
    expect(told).to.deep.equal(['b7:1 low,one', 'b7:1 '])
    expect(members.known('b7:1')?.devNode).to.equal('/dev/loop1')
  })
})
