import {expect} from 'chai'

import {droppedFeatureConditions, noneDropped} from '../../../src/lib/devices/dropped-features.js'

describe('droppedFeatureConditions', function () {
  it('none while the API server drops nothing: a cluster with the gates on shows no condition', function () {
    expect(droppedFeatureConditions('fpga', noneDropped)).to.deep.equal([])
  })

  it('a dropped extendedResourceName: limit requests not served, the limit named, what to do and the four components that need the gate', function () {
    const [condition, ...rest] = droppedFeatureConditions('fpga', {extendedResourceName: true, taints: false})
    expect(rest).to.deep.equal([])
    expect(condition).to.include({reason: 'ExtendedResourceDropped', status: 'False', type: 'LimitRequestsServed'})
    expect(condition.message).to.include('devices.nfdctl.io/fpga').and.include('fpga.devices.nfdctl.io').and.include('ask by ResourceClaim instead')
    expect(condition.message).to.include('DRAExtendedResource on in kube-apiserver, kube-scheduler, kube-controller-manager and kubelet')
  })

  it('dropped taints: unplugged devices leave the slice, what claims get instead, the gate and its components', function () {
    const [condition, ...rest] = droppedFeatureConditions('fpga', {extendedResourceName: false, taints: true})
    expect(rest).to.deep.equal([])
    expect(condition).to.include({reason: 'DeviceTaintsDropped', status: 'False', type: 'UnpluggedDevicesTainted'})
    expect(condition.message).to.include('leaves the slice').and.include('allocationMode: All').and.include('DRADeviceTaints on in kube-apiserver, kube-scheduler and kube-controller-manager')
  })

  it('both dropped: one condition each, of distinct types (the status keeps conditions by type)', function () {
    const types = droppedFeatureConditions('fpga', {extendedResourceName: true, taints: true}).map((c) => c.type)
    expect(types).to.deep.equal(['LimitRequestsServed', 'UnpluggedDevicesTainted'])
  })

  it("every reason and type fits the CRD's condition patterns", function () {
    for (const c of droppedFeatureConditions('fpga', {extendedResourceName: true, taints: true})) {
      expect(c.reason).to.match(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      expect(c.type).to.match(/^[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]$/)
    }
  })
})
