import {expect} from 'chai'

import type {HeldAccess} from '../../../src/lib/agent/access-applier.js'
import {criLabels, type ContainerRequest, type RequestedVia} from '../../../src/lib/agent/container-access.js'
import {containersToReconcile, ownedToKeep, planContainer, programAfter, runtimeDefaults, specDevices} from '../../../src/lib/agent/reconcile-plan.js'
import type {RecordedGrant} from '../../../src/lib/agent/grant-record.js'
import {ownedId, type OwnedDevice} from '../../../src/lib/devices/owned-devices.js'
import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import type {RuntimeContainer} from '../../../src/lib/runtime/containerd-client.js'
import type {EmulatedRules, OciDeviceCgroup} from '../../../src/lib/runtime/device-program.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

const loopClass = deviceClass('loop')

function container(id: string, podUid: string, name = 'app', kind = 'container'): RuntimeContainer {
  return {id, labels: {[criLabels.container]: name, [criLabels.kind]: kind, [criLabels.namespace]: 'ns', [criLabels.pod]: `pod-${podUid}`, [criLabels.podUid]: podUid}} as RuntimeContainer
}

function request(podUid: string, classes: Array<[string, RequestedVia]> = [['loop', 'annotation']]): ContainerRequest {
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
  const ownedNumbers: OwnedDevice[] = [
    {classes: ['loop'], devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'},
    {classes: ['loop'], devNode: '/dev/loop2', major: 7, minor: 2, type: 'b'},
    {classes: ['loop'], devNode: '/dev/loop3', major: 7, minor: 3, type: 'b'},
    {classes: ['nulls'], devNode: '/dev/null', major: 1, minor: 3, type: 'c'},
    {classes: ['serial'], devNode: '/dev/ttyUSB0', major: 188, minor: 0, type: 'c'},
    {classes: ['dra'], devNode: '/dev/loop5', major: 7, minor: 5, type: 'b'},
  ]
  const owned = (id: string): OwnedDevice | undefined => ownedNumbers.find((o) => ownedId(o) === id)
  // containerd's spec for any container: deny all, then the runtime's standard devices (rules, no nodes: runc makes them).
  const runtimeRules: OciDeviceCgroup[] = [
    {access: 'rwm', allow: false},
    {access: 'rwm', allow: true, major: 1, minor: 3, type: 'c'},
    {access: 'rwm', allow: true, major: 1, minor: 5, type: 'c'},
    {access: 'rwm', allow: true, major: 136, minor: -1, type: 'c'},
  ]
  /** What kubelet's DeviceSpec or a CDI device node adds: a node and its rule. */
  const given = (path: string, type: 'b' | 'c', major: number, minor: number) => ({
    node: {major, minor, path, type},
    rule: {access: 'rw', allow: true, major, minor, type} as OciDeviceCgroup,
  })
  const plan = (options: {
    classes?: Array<[string, RequestedVia]>
    asked?: boolean
    given?: Array<ReturnType<typeof given>>
    rules?: OciDeviceCgroup[]
    recorded?: RecordedGrant[]
    members?: typeof members
  }) => {
    const requested = options.classes ?? [['loop', 'limit']]
    return planContainer({
      allocated: new Map(),
      asked: options.asked ?? requested.length > 0,
      classes,
      known,
      members: options.members ?? members,
      ociDevices: [...(options.rules ?? runtimeRules), ...(options.given ?? []).map((g) => g.rule)],
      ociNodes: (options.given ?? []).map((g) => g.node),
      owned,
      recorded: options.recorded ?? [],
      request: request('u1', requested),
    })
  }

  it("by limit: what kubelet gave for the class is the agent's, the runtime's standard devices never are, though a class once had /dev/null", function () {
    const p = plan({given: [given('/dev/loop1', 'b', 7, 1), given('/dev/loop3', 'b', 7, 3)]})
    expect([...p.wanted.keys()]).to.deep.equal(['b7:1', 'b7:2'])
    expect([...p.base].filter((id) => !id.startsWith('c1:') && !id.startsWith('c5:'))).to.deep.equal([])
    expect(p.managed('c1:3'), '/dev/null: the runtime gave it').to.equal(undefined)
    // loop3 is gone, but kubelet gave its number for the class: the agent takes it back (node at the spec's path).
    expect(p.managed('b7:3')?.devNode).to.equal('/dev/loop3')
    expect(p.managed('b7:1')?.devNode).to.equal('/dev/loop1')
  })

  it("another plugin's device, at a number a class it does not hold had, is the runtime's; so is a class's number given by annotation", function () {
    const p = plan({classes: [['loop', 'limit']], given: [given('/dev/ttyUSB0', 'c', 188, 0)]})
    expect(p.base.has('c188:0')).to.equal(true)
    expect(p.managed('c188:0')).to.equal(undefined)
    const byAnnotation = plan({classes: [['loop', 'annotation']], given: [given('/dev/loop3', 'b', 7, 3)]})
    expect(byAnnotation.base.has('b7:3'), 'an annotation is never given by kubelet').to.equal(true)
  })

  it("a device the runtime allows by itself stays the runtime's even when a class held by limit gave it too; it is never wanted", function () {
    const nulls = {...loop(1), devName: 'null', devNode: '/dev/null', id: 'c1:3', major: 1, minor: 3, type: 'char' as const}
    const p = planContainer({
      allocated: new Map(),
      asked: true,
      classes: new Map([['nulls', deviceClass('nulls')]]),
      known: () => nulls,
      members: new Map([['nulls', [nulls]]]),
      ociDevices: [...runtimeRules, given('/dev/null', 'c', 1, 3).rule],
      ociNodes: [given('/dev/null', 'c', 1, 3).node],
      owned,
      recorded: [],
      request: request('u1', [['nulls', 'limit']]),
    })
    expect(p.base.has('c1:3')).to.equal(true)
    expect(p.managed('c1:3')).to.equal(undefined)
    expect([...p.wanted.keys()]).to.deep.equal([])
  })

  it("kubelet's node replaced by the CDI spec's (--cdi): one node, two rules, still the agent's", function () {
    const p = plan({given: [given('/dev/loop3', 'b', 7, 3)], rules: [...runtimeRules, given('/dev/loop3', 'b', 7, 3).rule]})
    expect(p.base.has('b7:3')).to.equal(false)
    expect(p.managed('b7:3')?.devNode).to.equal('/dev/loop3')
  })

  it("a privileged container (a wildcard rule, every host node in its spec): its /dev/null stays; its class devices given by limit are the agent's", function () {
    const p = plan({given: [given('/dev/null', 'c', 1, 3), given('/dev/loop3', 'b', 7, 3)], rules: [{access: 'rwm', allow: true}]})
    expect(p.base.has('c1:3')).to.equal(true)
    expect(p.managed('c1:3')).to.equal(undefined)
    expect(p.managed('b7:3')?.devNode).to.equal('/dev/loop3')
  })

  it("by claim: the CDI spec's node and its marker, the device's own path the one to remove", function () {
    const p = plan({classes: [['dra', 'claim']], given: [given('/dev/nfdctl/claims/uid-1/loop5', 'b', 7, 5), given('/dev/loop5', 'b', 7, 5)]})
    expect(p.base.has('b7:5')).to.equal(false)
    expect(p.managed('b7:5')?.devNode).to.equal('/dev/loop5')
  })

  it("a record of owned numbers without classes (an older agent's) explains a node for any class held by limit", function () {
    const legacy = planContainer({
      allocated: new Map(),
      asked: true,
      classes,
      known,
      members,
      ociDevices: [...runtimeRules, given('/dev/loop9', 'b', 7, 9).rule],
      ociNodes: [given('/dev/loop9', 'b', 7, 9).node],
      owned: (id) => (id === 'b7:9' ? {devNode: '/dev/loop9', major: 7, minor: 9, type: 'b'} : undefined),
      recorded: [],
      request: request('u1', [['loop', 'limit']]),
    })
    expect(legacy.managed('b7:9')?.devNode).to.equal('/dev/loop9')
  })

  it("asking: a device of a class it asks for that its spec does not name is the agent's (a grant lost from the record); another class's is not", function () {
    const p = plan({classes: [['loop', 'annotation']]})
    expect(p.managed('b7:3')?.devNode).to.equal('/dev/loop3')
    expect(p.managed('c188:0')).to.equal(undefined)
  })

  it("a container that asks for nothing keeps everything its OCI spec gives; only recorded grants are the agent's", function () {
    const p = plan({
      classes: [],
      given: [given('/dev/loop2', 'b', 7, 2)],
      recorded: [{access: 'rw', devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'}],
    })
    expect([...p.wanted.keys()]).to.deep.equal([])
    expect([...p.base].filter((id) => id.startsWith('b'))).to.deep.equal(['b7:2'])
    expect(p.managed('b7:1')?.devNode).to.equal('/dev/loop1')
    expect(p.managed('b7:2')).to.equal(undefined) // a class device given another way is not the agent's
    expect(p.managed('b7:3')).to.equal(undefined)
  })

  it("a recorded grant at a number the runtime gives is the runtime's: never revoked", function () {
    const p = plan({classes: [['loop', 'annotation']], recorded: [{access: 'rw', devNode: '/dev/null', major: 1, minor: 3, type: 'c'}]})
    expect(p.managed('c1:3')).to.equal(undefined)
  })

  it('a recorded grant keeps the node path it was made at, even when the device came back under another name', function () {
    const p = plan({
      classes: [['loop', 'annotation']],
      recorded: [
        {access: 'rw', devNode: '/dev/loop1-old', major: 7, minor: 1, type: 'b'},
        {access: 'r', devNode: '/dev/sdz', major: 8, minor: 0, type: 'b'},
      ],
    })
    expect(p.managed('b7:1')).to.deep.include({devNode: '/dev/loop1-old', devPath: '/devices/virtual/block/loop1'})
    // Known only from the record (unplugged while the agent was away): enough of a device to take its rule back.
    expect(p.managed('b8:0')).to.deep.include({devNode: '/dev/sdz', major: 8, minor: 0, type: 'block'})
  })

  it('allocation Device by limit: only what kubelet allocated to the container', function () {
    const perDevice = new Map([['loop', {...loopClass, spec: {...loopClass.spec, allocation: 'Device' as const}}]])
    const allocated = new Map([['loop', [stableDeviceId(loop(2))]]])
    const input = {allocated, asked: true, classes: perDevice, known, members, owned, recorded: []}
    expect([...planContainer({...input, request: request('u1', [['loop', 'limit']])}).wanted.keys()]).to.deep.equal(['b7:2'])
    expect([...planContainer({...input, request: request('u1', [['loop', 'annotation']])}).wanted.keys()]).to.deep.equal([])
  })
})

describe('runtimeDefaults', function () {
  it("the OCI standard devices, and an allow rule at a number no device node has; a class device given twice (kubelet's node replaced by CDI's) is not", function () {
    const spec = specDevices(
      [
        {access: 'rwm', allow: true, major: 10, minor: 200, type: 'c'},
        {access: 'rw', allow: true, major: 7, minor: 1, type: 'b'},
        {access: 'rw', allow: true, major: 7, minor: 1, type: 'b'},
        {access: 'rwm', allow: true, type: 'a'},
      ],
      [{major: 7, minor: 1, path: '/dev/loop1', type: 'b'}, {major: 7, minor: 1, path: '/dev/nfdctl/claims/u/loop1', type: 'b'}, {path: '/dev/odd'}],
    )
    expect([...runtimeDefaults(spec)].sort()).to.deep.equal(['c10:200', 'c1:3', 'c1:5', 'c1:7', 'c1:8', 'c1:9', 'c5:0', 'c5:1', 'c5:2'])
    expect([...spec.allows].sort()).to.deep.equal(['b7:1', 'c10:200'])
    expect(spec.nodes.get('b7:1')).to.deep.equal(['/dev/loop1', '/dev/nfdctl/claims/u/loop1'])
  })
})

describe('ownedToKeep', function () {
  const number = (minor: number, classes: string[]): OwnedDevice => ({classes, devNode: `/dev/loop${minor}`, major: 7, minor, type: 'b'})
  const owned = [number(1, ['loop']), number(2, ['loop']), number(3, ['other'])]

  it('keeps a number a class has a device at, and one a container holds by a class it was given it for; forgets the rest', function () {
    const keep = ownedToKeep(owned, new Map([['loop', [loop(1)]]]), () => [
      {given: new Set(['loop']), nodes: () => ['b7:2', 'b7:3']},
      {given: new Set(), nodes: () => ['b7:3']},
    ])
    expect([...keep].sort()).to.deep.equal(['b7:1', 'b7:2'])
  })

  it('reads no container while every number is in a class', function () {
    const keep = ownedToKeep([number(1, ['loop'])], new Map([['loop', [loop(1)]]]), () => {
      throw new Error('read')
    })
    expect([...keep]).to.deep.equal(['b7:1'])
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
