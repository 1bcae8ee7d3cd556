import {expect} from 'chai'

import {planStartSweep, sweepAtStart} from '../../../src/lib/agent/start-sweep.js'
import {identityDigest, type OwnedDevice} from '../../../src/lib/devices/owned-devices.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import type {RuntimeContainer} from '../../../src/lib/runtime/containerd-client.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'

const disk = (n: number, serial: string): Device => loopDevice(n, {ID_SERIAL: serial, ID_SERIAL_SHORT: serial})
const owned = (d: Device): OwnedDevice => ({devNode: d.devNode, identity: identityDigest(d), major: d.major, minor: d.minor, type: 'b'})
const rule = (minor: number) => ({access: 'rwm', allow: true, major: 7, minor, type: 'b'})

/** A workload container whose spec allows these loop numbers, with nfdctl's marks when asked. */
function container(id: string, minors: number[], marks: {env?: string; marker?: string} = {}): RuntimeContainer {
  return {
    id,
    labels: {'io.cri-containerd.kind': 'container', 'io.kubernetes.pod.name': id, 'io.kubernetes.pod.namespace': 'ns'},
    spec: {
      linux: {devices: marks.marker === undefined ? [] : [{path: marks.marker}], resources: {devices: [{access: 'rwm', allow: false}, ...minors.map(rule)]}},
      process: {env: ['PATH=/bin', ...(marks.env === undefined ? [] : [marks.env])]},
    },
  }
}

describe('the start sweep: numbers whose device went while the agent was away, taken before anything slow', function () {
  const changed = [owned(disk(2, 'd'))]
  const running = new Map([
    ['granted', 11],
    ['by-limit', 12],
    ['by-claim', 13],
    ['runtime', 14],
  ])
  const grants = (id: string) => (id === 'granted' ? [{access: 'rw', devNode: '/dev/loop2', major: 7, minor: 2, type: 'b' as const}] : [])

  it("takes a changed number from containers that got it through nfdctl (a recorded grant, kubelet's Allocate, a claim's CDI spec), never from the runtime's own rules", function () {
    const targets = planStartSweep({
      changed,
      containers: [
        container('granted', []),
        container('by-limit', [1, 2], {env: 'NFDCTL_DEVICES_DISKS=/dev/loop1,/dev/loop2'}),
        container('by-claim', [2], {marker: '/dev/nfdctl/claims/0b8a9c2e-1111-2222-3333-444455556666/disk-d-0123456789ab'}),
        container('runtime', [2]),
        container('not-running', [2], {env: 'NFDCTL_DEVICES_DISKS=/dev/loop2'}),
        {...container('sandbox', [2], {env: 'NFDCTL_DEVICES_X=y'}), labels: {'io.cri-containerd.kind': 'sandbox'}},
      ],
      grants,
      running,
    })
    expect(targets.map((t) => [t.container.id, t.pid, t.devices.map((d) => d.id)])).to.deep.equal([
      ['granted', 11, ['b7:2']],
      ['by-limit', 12, ['b7:2']],
      ['by-claim', 13, ['b7:2']],
    ])
    expect(planStartSweep({changed: [], containers: [container('granted', [])], grants, running})).to.deep.equal([])
  })

  it('does nothing, not even ask containerd, when every owned number has its device; lists and revokes otherwise, and a containerd that does not answer is left to the first batch', async function () {
    const asked: string[] = []
    const revoked: string[] = []
    const options = {
      containerd: {
        listContainers: async () => {
          asked.push('containers')
          return [container('granted', [])]
        },
        listTasks: async () => [{containerId: 'granted', pid: 11, status: 'RUNNING' as const}],
      },
      grants,
      logger: noopLogger,
      owned: () => changed,
      present: () => [disk(2, 'd')],
      reconciler: {
        revoke: async (c: RuntimeContainer, _pid: number, devices: readonly Device[]) => {
          revoked.push(`${c.id} ${devices.map((d) => d.id)}`)
          return [...devices]
        },
      },
    }
    expect(await sweepAtStart(options)).to.equal(0)
    expect(asked).to.deep.equal([])
    expect(await sweepAtStart({...options, present: () => [disk(2, 'g')]})).to.equal(1)
    expect(revoked).to.deep.equal(['granted b7:2'])
    const hanging = {...options.containerd, listTasks: () => new Promise<never>(() => {})}
    expect(await sweepAtStart({...options, containerd: hanging, present: () => [], timeoutMs: 20})).to.equal(0)
  })
})
