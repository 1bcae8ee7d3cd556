import {expect} from 'chai'

import type {HeldAccess} from '../../../src/lib/agent/access-applier.js'
import {criLabels, type ContainerRequest} from '../../../src/lib/agent/container-access.js'
import {containersToReconcile, planContainer, programAfter} from '../../../src/lib/agent/reconcile-plan.js'
import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import type {RuntimeContainer} from '../../../src/lib/runtime/containerd-client.js'
import type {EmulatedRules} from '../../../src/lib/runtime/device-program.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const loopClass = deviceClass('loop')

function container(id: string, podUid: string, name = 'app', kind = 'container'): RuntimeContainer {
  return {id, labels: {[criLabels.container]: name, [criLabels.kind]: kind, [criLabels.namespace]: 'ns', [criLabels.pod]: `pod-${podUid}`, [criLabels.podUid]: podUid}} as RuntimeContainer
}

function request(podUid: string, classes: Array<[string, 'limit' | 'annotation']> = [['loop', 'annotation']]): ContainerRequest {
  return {classes: new Map(classes), container: 'app', namespace: 'ns', pod: `pod-${podUid}`, podUid}
}

describe('containersToReconcile', function () {
  const containers = [container('c1', 'u1'), container('c2', 'u2'), container('c3', 'u3'), container('s1', 'u1', 'POD', 'sandbox'), container('stopped', 'u1', 'init')]
  const running = new Map([
    ['c1', 101],
    ['c2', 102],
    ['c3', 103],
    ['s1', 100],
  ])
  const requests = new Map([['u1/app', request('u1')]])

  it('the first batch looks at every running workload container: one may hold devices from before the agent started', function () {
    const work = containersToReconcile({containers, mayHold: undefined, requests, running})
    expect(work.map((w) => [w.container.id, w.pid, w.asked])).to.deep.equal([
      ['c1', 101, true],
      ['c2', 102, false],
      ['c3', 103, false],
    ])
    // A container whose pod asks for nothing is described from its labels, asking for nothing.
    expect(work[1].request).to.deep.equal({classes: new Map(), container: 'app', namespace: 'ns', pod: 'pod-u2', podUid: 'u2'})
  })

  it('later batches: containers that ask, and those that may still hold what they were given', function () {
    const work = containersToReconcile({containers, mayHold: new Set(['c3']), requests, running})
    expect(work.map((w) => w.container.id)).to.deep.equal(['c1', 'c3'])
  })

  it('matches a container to its pod by UID, not by name: a pod re-created under the same name asks anew', function () {
    const recreated = new Map([['u9/app', {...request('u9'), pod: 'pod-u1'}]])
    const work = containersToReconcile({containers: [container('c1', 'u1')], mayHold: new Set(), requests: recreated, running})
    expect(work).to.deep.equal([])
  })

  it('skips containers with no running task and sandboxes', function () {
    const work = containersToReconcile({containers, mayHold: undefined, requests, running: new Map([['s1', 100]])})
    expect(work).to.deep.equal([])
  })
})

describe('containersToReconcile: containers holding ResourceClaims', function () {
  const containers = [container('c1', 'u1'), container('c4', 'u4'), container('c5', 'u5'), container('s4', 'u4', 'POD', 'sandbox')]
  const running = new Map([
    ['c1', 101],
    ['c4', 104],
    ['c5', 105],
    ['s4', 100],
  ])
  const requests = new Map([['u1/app', request('u1')]])
  const held = new Map([['dra', [stableDeviceId(loop(2))]]])
  // Every container but c5 holds a claim's device (the sandbox too, as a lookup that does not check kinds would say).
  const claimed = (c: RuntimeContainer): ReadonlyMap<string, readonly string[]> | undefined => (c.id === 'c5' ? new Map() : held)

  it('a container whose pod asks for nothing but that holds a claim asks for its class by claim, with what it holds', function () {
    const work = containersToReconcile({claimed, containers, mayHold: new Set(), requests, running})
    const c4 = work.find((w) => w.container.id === 'c4')
    expect(c4).to.not.equal(undefined)
    expect(c4!.asked).to.equal(true)
    expect(c4!.claimed).to.equal(held)
    expect(c4!.request).to.deep.equal({classes: new Map([['dra', 'claim']]), container: 'app', namespace: 'ns', pod: 'pod-u4', podUid: 'u4'})
  })

  it('a container asking by annotation and holding a claim asks for both', function () {
    const work = containersToReconcile({claimed, containers, mayHold: new Set(), requests, running})
    const c1 = work.find((w) => w.container.id === 'c1')
    expect(c1?.asked).to.equal(true)
    expect(c1?.claimed).to.equal(held)
    expect([...(c1?.request.classes ?? [])]).to.deep.equal([
      ['loop', 'annotation'],
      ['dra', 'claim'],
    ])
    expect(c1?.request).to.deep.include({container: 'app', namespace: 'ns', pod: 'pod-u1', podUid: 'u1'})
  })

  it('never a sandbox; a container holding no claim device is work only as before', function () {
    const work = containersToReconcile({claimed, containers, mayHold: new Set(), requests, running})
    expect(work.map((w) => w.container.id)).to.deep.equal(['c1', 'c4'])
    const first = containersToReconcile({claimed, containers, mayHold: undefined, requests, running})
    expect(first.map((w) => [w.container.id, w.asked])).to.deep.equal([
      ['c1', true],
      ['c4', true],
      ['c5', false],
    ])
  })

  it('a claim of a container without a running task gives no work', function () {
    const work = containersToReconcile({claimed, containers, mayHold: undefined, requests, running: new Map([['s4', 100]])})
    expect(work).to.deep.equal([])
  })
})

describe('planContainer', function () {
  const members = new Map([['loop', [loop(1), loop(2)]]])
  const classes = new Map([['loop', loopClass]])
  const known = (id: string): Device | undefined => [loop(1), loop(2), loop(3)].find((d) => d.id === id)

  it("a container that asks: every class device present is wanted, every class device seen is the agent's, nothing is the runtime's", function () {
    const plan = planContainer({
      allocated: new Map(),
      asked: true,
      classes,
      known,
      members,
      recorded: [],
      request: request('u1'),
      ociDevices: [{access: 'rwm', allow: true, major: 7, minor: 1, type: 'b'}],
    })
    expect([...plan.wanted.keys()]).to.deep.equal(['b7:1', 'b7:2'])
    expect(plan.wanted.get('b7:1')?.access).to.equal('rw')
    expect([...plan.base]).to.deep.equal([])
    // loop3 is gone, but was a class device: a rule naming it is the agent's to take back.
    expect(plan.managed('b7:3')?.devNode).to.equal('/dev/loop3')
    expect(plan.managed('c1:3')).to.equal(undefined)
  })

  it("a container that asks for nothing keeps its OCI spec's specific allows; only recorded grants are the agent's", function () {
    const plan = planContainer({
      allocated: new Map(),
      asked: false,
      classes,
      known,
      members,
      request: request('u1', []),
      ociDevices: [
        {access: 'rwm', allow: false, type: 'a'},
        {access: 'rw', allow: true, major: 7, minor: 2, type: 'b'},
        {access: 'rwm', allow: true, major: 136, type: 'c'},
        {access: 'rwm', allow: true, major: 1, minor: 3, type: 'c'},
      ],
      recorded: [{access: 'rw', devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'}],
    })
    expect([...plan.wanted.keys()]).to.deep.equal([])
    expect([...plan.base].sort()).to.deep.equal(['b7:2', 'c1:3'])
    expect(plan.managed('b7:1')?.devNode).to.equal('/dev/loop1')
    expect(plan.managed('b7:2')).to.equal(undefined) // a class device given another way is not the agent's
  })

  it('a recorded grant keeps the node path it was made at, even when the device came back under another name', function () {
    const plan = planContainer({
      allocated: new Map(),
      asked: true,
      classes,
      known,
      members,
      request: request('u1'),
      recorded: [
        {access: 'rw', devNode: '/dev/loop1-old', major: 7, minor: 1, type: 'b'},
        {access: 'r', devNode: '/dev/sdz', major: 8, minor: 0, type: 'b'},
      ],
    })
    expect(plan.managed('b7:1')).to.deep.include({devNode: '/dev/loop1-old', devPath: '/devices/virtual/block/loop1'})
    // Known only from the record (unplugged while the agent was away): enough of a device to take its rule back.
    expect(plan.managed('b8:0')).to.deep.include({devNode: '/dev/sdz', major: 8, minor: 0, type: 'block'})
  })

  it('allocation Device by limit: only what kubelet allocated to the container', function () {
    const perDevice = new Map([['loop', {...loopClass, spec: {...loopClass.spec, allocation: 'Device' as const}}]])
    const allocated = new Map([['loop', [stableDeviceId(loop(2))]]])
    const plan = planContainer({allocated, asked: true, classes: perDevice, known, members, recorded: [], request: request('u1', [['loop', 'limit']])})
    expect([...plan.wanted.keys()]).to.deep.equal(['b7:2'])
    const byAnnotation = planContainer({allocated, asked: true, classes: perDevice, known, members, recorded: [], request: request('u1', [['loop', 'annotation']])})
    expect([...byAnnotation.wanted.keys()]).to.deep.equal([])
  })
})

describe('programAfter', function () {
  const held = (program?: {id: number; rules: EmulatedRules}): HeldAccess => ({
    devices: new Map([
      ['b7:1', {access: 'rw', device: loop(1)}],
      ['c1:3', {access: 'rwm', device: {...loop(3), id: 'c1:3', major: 1, minor: 3, type: 'char' as const}}],
    ]),
    program,
  })

  it("keeps the runtime's rules, drops the agent's old ones and adds each device granted", function () {
    const program = programAfter(
      held({
        id: 42,
        rules: {
          defaultAllow: false,
          rules: [
            {access: 'rwm', allow: true, major: 1, minor: 3, type: 'c'},
            {access: 'rw', allow: true, major: 7, minor: 1, type: 'b'},
          ],
        },
      }),
      new Map([['b7:2', {access: 'r', device: loop(2)}]]),
      new Set(['c1:3']),
    )
    expect(program).to.deep.equal({
      replaces: 42,
      rules: [
        {access: 'rwm', allow: false, major: '*', minor: '*', type: 'a'},
        {access: 'rwm', allow: true, major: 1, minor: 3, type: 'c'},
        {access: 'r', allow: true, major: 7, minor: 2, type: 'b'},
      ],
    })
  })

  it('has nothing to replace on cgroup v1 or a hybrid host', function () {
    expect(programAfter(held(), new Map(), new Set())).to.equal(undefined)
  })
})
