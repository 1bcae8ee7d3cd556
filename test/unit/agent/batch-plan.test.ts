import {expect} from 'chai'

import {batchWork, needsAllocations, planBatch, podAsks} from '../../../src/lib/agent/batch-plan.js'
import {criLabels, podCodec} from '../../../src/lib/agent/container-access.js'
import type {RuntimeContainer} from '../../../src/lib/runtime/containerd-client.js'
import {deviceClass} from '../../support/device-class.js'

/** A pod asking by limit for a DRA class, as the API server sends it once kube-scheduler bound it (KEP-5004). */
function limitPod(extendedClaim: string | undefined): unknown {
  return {
    metadata: {name: 'web-0', namespace: 'lab', resourceVersion: '1', uid: 'pod-1'},
    spec: {containers: [{name: 'main', resources: {limits: {'devices.nfdctl.io/serial': '2'}}}]},
    status: {
      phase: 'Running',
      ...(extendedClaim === undefined
        ? {}
        : {
            extendedResourceClaimStatus: {requestMappings: [{containerName: 'main', requestName: 'container-0-request-0', resourceName: 'devices.nfdctl.io/serial'}], resourceClaimName: extendedClaim},
          }),
    },
  }
}

const container: RuntimeContainer = {id: 'c1', labels: {[criLabels.container]: 'main', [criLabels.namespace]: 'lab', [criLabels.pod]: 'web-0', [criLabels.podUid]: 'pod-1'}}
const classes = new Map([['serial', deviceClass('serial', {allocation: 'DRA'})]])

describe('batchWork and planBatch: a limit of a DRA class served by the claim kube-scheduler made', function () {
  const work = (pod: unknown) =>
    batchWork({
      claimed: () => new Map([['serial', ['id-a', 'id-b']]]),
      containers: [container],
      mayHold: undefined,
      pods: [podAsks(podCodec.toItem(pod)!)],
      running: new Map([['c1', 42]]),
    })

  it("reads the container's claim markers when the pod's status names the scheduler's claim: the limit is held by claim, kubelet's device-plugin allocations are not needed", function () {
    const [one] = work(limitPod('web-0-extended-resources-x7k2p'))
    expect([...one.request.classes]).to.deep.equal([['serial', 'claim']])
    expect(needsAllocations([one], classes)).to.equal(false)
    const plan = planBatch({allocations: undefined, classes, holders: new Set(), namespaceLabels: () => ({}), nodeName: 'worker-1', pods: [], work: [one]})
    expect(plan.decision.refused.size).to.equal(0)
    expect(plan.containers[0].allocated).to.deep.equal(new Map([['serial', ['id-a', 'id-b']]]))
  })

  it('a pod with neither ResourceClaims nor a scheduler claim is not asked about claims: its limit stays a limit', function () {
    const [one] = work(limitPod(undefined))
    expect([...one.request.classes]).to.deep.equal([['serial', 'limit']])
  })
})
