import {expect} from 'chai'

import {deviceClassApiVersion} from '../../../src/lib/devices/types.js'
import {draClassName} from '../../../src/lib/devices/resource-names.js'
import {classLabel, className, classSelector, DraDeviceClasses, draDeviceClassOf, extendedResourceNameDropped} from '../../../src/lib/dra/dra-device-classes.js'
import type {KubeClient} from '../../../src/lib/kube/kube-client.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {classAttribute} from '../../../src/lib/dra/resource-slices.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeApiClient} from '../../support/fake-api-client.js'

describe('draClassName and className', function () {
  it('name the resource.k8s.io DeviceClass <class>.devices.nfdctl.io and read the class back from it', function () {
    expect(draClassName('usb-serial')).to.equal('usb-serial.devices.nfdctl.io')
    for (const name of ['usb-serial', 'a', 'a.b', 'gpio.v2-0', 'x'.repeat(63), 'devices']) expect(className(draClassName(name)), name).to.equal(name)
  })

  it("another driver's class, or the bare domain, is no class of ours", function () {
    for (const other of [
      'gpu.example.com',
      'devices.nfdctl.io',
      '.devices.nfdctl.io',
      'serial.otherdevices.nfdctl.io',
      'serial.devices.nfdctl.io.example.com',
      'serial-devices.nfdctl.io',
      'serial.devices.nfdctl.i',
      '',
    ]) {
      expect(className(other), other).to.equal(undefined)
    }
  })
})

describe('classSelector', function () {
  it("selects this driver's devices that carry the class's attribute", function () {
    expect(classSelector('usb-serial')).to.equal('device.driver == "devices.nfdctl.io" && "class_usb_serial" in device.attributes["devices.nfdctl.io"]')
  })

  it('names the hashed attribute of a long or dotted class, and two classes never share a selector', function () {
    const long = `${'x'.repeat(40)}.serial`
    expect(classSelector(long)).to.include(`"${classAttribute(long)}" in device.attributes["devices.nfdctl.io"]`)
    expect(classSelector('a.b')).to.not.equal(classSelector('a-b'))
  })
})

describe('draDeviceClassOf', function () {
  it('a class with a UID: owned by it (so it goes when the class goes), labelled, selecting its devices, asked for by the limit devices.nfdctl.io/<class>', function () {
    const made = draDeviceClassOf({...deviceClass('usb-serial', {allocation: 'DRA'}), metadata: {name: 'usb-serial', uid: 'uid-1'}})
    expect(made).to.deep.equal({
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: {
        labels: {'app.kubernetes.io/managed-by': 'nfdctl', 'devices.nfdctl.io/class': 'usb-serial'},
        name: 'usb-serial.devices.nfdctl.io',
        ownerReferences: [{apiVersion: deviceClassApiVersion, kind: 'DeviceClass', name: 'usb-serial', uid: 'uid-1'}],
      },
      spec: {extendedResourceName: 'devices.nfdctl.io/usb-serial', selectors: [{cel: {expression: classSelector('usb-serial')}}]},
    })
    expect(made.metadata.labels[classLabel]).to.equal('usb-serial')
  })

  it('a class without a UID: no owner reference is sent (an owner without a UID is refused)', function () {
    const made = draDeviceClassOf(deviceClass('usb-serial', {allocation: 'DRA'}))
    expect(made.metadata.ownerReferences).to.equal(undefined)
    expect(JSON.parse(JSON.stringify(made)).metadata).to.deep.equal({
      labels: {'app.kubernetes.io/managed-by': 'nfdctl', 'devices.nfdctl.io/class': 'usb-serial'},
      name: 'usb-serial.devices.nfdctl.io',
    })
  })

  it('is the same object from every node: only the class decides it', function () {
    const a = draDeviceClassOf({...deviceClass('gpio', {allocation: 'DRA', permissions: 'r'}), metadata: {generation: 4, name: 'gpio', uid: 'u'}})
    const b = draDeviceClassOf({...deviceClass('gpio', {allocation: 'DRA', permissions: 'rw'}), metadata: {generation: 9, name: 'gpio', uid: 'u'}})
    expect(JSON.stringify(a)).to.equal(JSON.stringify(b))
  })
})

describe('extendedResourceNameDropped', function () {
  const sent = draDeviceClassOf({...deviceClass('fpga', {allocation: 'DRA'}), metadata: {name: 'fpga', uid: 'u1'}})

  it('true when the API server returns the DeviceClass without the extendedResourceName it was sent (DRAExtendedResource off)', function () {
    expect(extendedResourceNameDropped(sent, {...sent, spec: {selectors: sent.spec.selectors}})).to.equal(true)
  })

  it('false when it kept it; no judgement on an answer without a spec (nothing to read it from)', function () {
    expect(extendedResourceNameDropped(sent, JSON.parse(JSON.stringify(sent)))).to.equal(false)
    expect(extendedResourceNameDropped(sent, undefined)).to.equal(false)
    expect(extendedResourceNameDropped(sent, {kind: 'Status'})).to.equal(false)
  })
})

describe('DraDeviceClasses: what the API server drops', function () {
  const path = (name: string) => `/apis/resource.k8s.io/v1/deviceclasses/${name}.devices.nfdctl.io`
  const dra = (name: string) => ({...deviceClass(name, {allocation: 'DRA'}), metadata: {name, uid: `u-${name}`}})

  it('tells a change of whether extendedResourceName is kept once, not per apply', async function () {
    const client = new FakeApiClient()
    const told: boolean[] = []
    const classes = new DraDeviceClasses({client: client as unknown as KubeClient, complete: () => false, logger: noopLogger, onDroppedChanged: (d) => told.push(d), onError: () => {}})
    const [a, b, c] = [dra('a'), dra('b'), dra('c')]
    for (const k of [a, b]) client.answer('PATCH', path(k.metadata.name), {...draDeviceClassOf(k), spec: {selectors: draDeviceClassOf(k).spec.selectors}})
    await classes.sync([a, b])
    expect(classes.extendedResourceNameDropped).to.equal(true)
    expect(told).to.deep.equal([true])
    // The gate turned on (a new class applied): kept again, told once more.
    client.answer('PATCH', path('c'), draDeviceClassOf(c))
    await classes.sync([a, b, c])
    expect(classes.extendedResourceNameDropped).to.equal(false)
    expect(told).to.deep.equal([true, false])
    await classes.stop()
  })
})
