import {expect} from 'chai'

import type {PodResources} from '../../../src/lib/kubelet/device-plugin-api.js'
import {podAllocations, type KnownPod} from '../../../src/lib/kubelet/pod-resources.js'

const resource = 'devices.nfdctl.io/serial'

/** kubelet's entry for a pod whose container `main` holds `ids` of the serial class. */
const entry = (name: string, ids: string[], namespace = 'lab'): PodResources => ({
  containers: [{devices: [{device_ids: ids, resource_name: resource}], name: 'main'}],
  name,
  namespace,
})
const known = (name: string, uid: string, namespace = 'lab'): KnownPod => ({name, namespace, uid})

describe('podAllocations', function () {
  it('gives a container the IDs kubelet allocated it, of the resource asked for only', function () {
    const listed: PodResources[] = [
      {
        containers: [
          {
            devices: [
              {device_ids: ['a'], resource_name: resource},
              {device_ids: ['x'], resource_name: 'example.com/other'},
            ],
            name: 'main',
          },
        ],
        name: 'p',
        namespace: 'lab',
      },
      entry('p', ['b'], 'other-ns'),
    ]
    const allocations = podAllocations(listed, [known('p', 'uid-1'), known('p', 'uid-9', 'other-ns')])
    expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'main', resource)).to.deep.equal(['a'])
    expect(allocations.devicesOf({name: 'p', namespace: 'other-ns'}, 'main', resource)).to.deep.equal(['b'])
    expect(allocations.ambiguous).to.deep.equal([])
  })

  it('gives nothing to a container, pod or resource kubelet does not list', function () {
    const allocations = podAllocations([entry('p', ['a'])], [known('p', 'uid-1'), known('q', 'uid-2')])
    expect(allocations.devicesOf({name: 'q', namespace: 'lab'}, 'main', resource)).to.deep.equal([])
    expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'sidecar', resource)).to.deep.equal([])
    expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'main', 'devices.nfdctl.io/other')).to.deep.equal([])
  })

  it('cannot tell whose the IDs are while kubelet lists a name twice (a pod re-created while the old one terminates)', function () {
    // Whichever entry comes first, the new pod must not be given the old pod's device.
    for (const listed of [
      [entry('p', ['old-device']), entry('p', ['new-device'])],
      [entry('p', ['new-device']), entry('p', ['old-device'])],
    ]) {
      const allocations = podAllocations(listed, [known('p', 'uid-new')])
      expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'main', resource)).to.equal(undefined)
      expect(allocations.ambiguous).to.deep.equal(['lab/p'])
    }
  })

  it('cannot tell whose the IDs are while two pods of one name are on the node, though kubelet lists one', function () {
    // The old pod's container still runs (known from containerd's labels), the new one is the informer's.
    const allocations = podAllocations([entry('p', ['device'])], [known('p', 'uid-new'), known('p', 'uid-old')])
    expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'main', resource)).to.equal(undefined)
    expect(allocations.ambiguous).to.deep.equal(['lab/p'])
  })

  it('tells them apart again once one pod of the name is left, and the same UID twice is one pod', function () {
    const allocations = podAllocations([entry('p', ['new-device'])], [known('p', 'uid-new'), known('p', 'uid-new')])
    expect(allocations.devicesOf({name: 'p', namespace: 'lab'}, 'main', resource)).to.deep.equal(['new-device'])
    expect(allocations.ambiguous).to.deep.equal([])
  })

  it('a name shared across namespaces is no ambiguity', function () {
    const allocations = podAllocations([entry('p', ['a']), entry('p', ['b'], 'other-ns')], [known('p', 'uid-1'), known('p', 'uid-2', 'other-ns')])
    expect(allocations.ambiguous).to.deep.equal([])
  })
})
