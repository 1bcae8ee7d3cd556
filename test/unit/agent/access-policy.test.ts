import {expect} from 'chai'

import {decideAccess, holderKey, limitHoldersOf, type PolicyInput} from '../../../src/lib/agent/access-policy.js'
import {containerRequests, type ContainerRequest, type RequestedVia} from '../../../src/lib/agent/container-access.js'
import type {DeviceClass, DeviceClassSpec} from '../../../src/lib/devices/types.js'
import {deviceClass} from '../../support/device-class.js'

/** Room for every request, unless the test is about capacity. */
const roomyClass = (name: string, spec: Partial<DeviceClassSpec> = {}): DeviceClass => deviceClass(name, {capacity: 10, ...spec})

let pods = 0
function request(namespace: string, classes: Record<string, RequestedVia>, createdAt = `2026-12-05T10:00:${String(pods).padStart(2, '0')}Z`): ContainerRequest {
  pods++
  return {classes: new Map(Object.entries(classes)), container: 'main', createdAt, namespace, pod: `p${pods}`, podUid: `uid-${pods}`}
}

const namespaces: Record<string, Record<string, string>> = {
  lab: {'kubernetes.io/metadata.name': 'lab', team: 'hw'},
  prod: {'kubernetes.io/metadata.name': 'prod'},
}

interface Extra {
  holders?: Set<string>
  /** Default: the limit requests among `requests`. */
  limitHolders?: Map<string, number>
  /** Default: every limit allocated. */
  notAllocated?: ContainerRequest[]
}

function decide(classes: DeviceClass[], requests: ContainerRequest[], extra: Extra = {}): ReturnType<typeof decideAccess> {
  const input: PolicyInput = {
    classes: new Map(classes.map((c) => [c.metadata.name, c])),
    holders: extra.holders ?? new Set(),
    limitAllocated: (r) => !(extra.notAllocated ?? []).includes(r),
    limitHolders: extra.limitHolders ?? limitHoldersOf([{requests}]),
    namespaceLabels: (ns) => namespaces[ns],
    nodeName: 'worker-1',
    requests,
  }
  return decideAccess(input)
}

const admittedClasses = (decision: ReturnType<typeof decideAccess>, r: ContainerRequest): string[] => [...decision.admitted.get(`${r.podUid}/${r.container}`)!.classes.keys()]
const reasons = (decision: ReturnType<typeof decideAccess>, r: ContainerRequest): string[] => (decision.refused.get(`${r.podUid}/${r.container}`) ?? []).map((x) => `${x.class}:${x.reason}`)

describe('decideAccess: who may hold a DeviceClass (devices.nfdctl.io)', function () {
  it('refuses the annotation for a class without annotationAccess (the default), and says how to ask instead', function () {
    const r = request('lab', {serial: 'annotation'})
    const decision = decide([roomyClass('serial')], [r])
    expect(admittedClasses(decision, r)).to.deep.equal([])
    expect(reasons(decision, r)).to.deep.equal(['serial:annotation-access-off'])
    expect(decision.refused.get(`${r.podUid}/main`)![0].message).to.match(/no spec\.annotationAccess.*resource limit devices\.nfdctl\.io\/serial: 1/)
  })

  it('admits the annotation only in namespaces the namespaceSelector selects; {} selects every namespace', function () {
    const byName = roomyClass('serial', {annotationAccess: {namespaceSelector: {matchLabels: {'kubernetes.io/metadata.name': 'lab'}}}})
    const everyone = roomyClass('gpio', {annotationAccess: {namespaceSelector: {}}})
    const inLab = request('lab', {gpio: 'annotation', serial: 'annotation'})
    const inProd = request('prod', {gpio: 'annotation', serial: 'annotation'})
    const decision = decide([byName, everyone], [inLab, inProd])
    expect(admittedClasses(decision, inLab).sort()).to.deep.equal(['gpio', 'serial'])
    expect(admittedClasses(decision, inProd)).to.deep.equal(['gpio'])
    expect(reasons(decision, inProd)).to.deep.equal(['serial:namespace-not-admitted'])
    expect(decision.refused.get(`${inProd.podUid}/main`)![0].message).to.include('namespace prod is not selected')
  })

  it('matchExpressions: NotIn admits a namespace without the label; a namespace not known (yet) is never admitted, and pending', function () {
    const notProd = roomyClass('serial', {annotationAccess: {namespaceSelector: {matchExpressions: [{key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['prod']}]}}})
    const lab = request('lab', {serial: 'annotation'})
    const unknown = request('ghost', {serial: 'annotation'})
    const decision = decide([notProd], [lab, unknown])
    expect(admittedClasses(decision, lab)).to.deep.equal(['serial'])
    expect(admittedClasses(decision, unknown)).to.deep.equal([])
    expect(reasons(decision, unknown)).to.deep.equal(['serial:namespace-pending'])
  })

  it('refuses an annotation on an allocation Device class (kubelet gives those devices one container each), whatever its policy', function () {
    const devices = roomyClass('disk', {allocation: 'Device', annotationAccess: {namespaceSelector: {}}})
    const r = request('lab', {disk: 'annotation'})
    expect(reasons(decide([devices], [r]), r)).to.deep.equal(['disk:allocation-device'])
  })

  it('admits a request by claim as it is: the scheduler allocated it and kubelet had it prepared for the pod', function () {
    const dra = deviceClass('disks', {allocation: 'DRA', capacity: 1})
    const first = request('prod', {disks: 'claim'})
    const second = request('ghost', {disks: 'claim', elsewhere: 'claim'})
    const decision = decide([dra], [first, second], {limitHolders: new Map([['disks', 5]])})
    expect([...decision.admitted.get(`${first.podUid}/main`)!.classes]).to.deep.equal([['disks', 'claim']])
    expect([...decision.admitted.get(`${second.podUid}/main`)!.classes]).to.deep.equal([
      ['disks', 'claim'],
      ['elsewhere', 'claim'],
    ])
    expect([reasons(decision, first), reasons(decision, second)]).to.deep.equal([[], []])
    // A claim takes no slot of a class's capacity.
    expect(decision.holders.size).to.equal(0)
  })

  it('refuses an annotation naming a class with allocation DRA, whatever its policy, and says to ask with a ResourceClaim', function () {
    const dra = roomyClass('disks', {allocation: 'DRA', annotationAccess: {namespaceSelector: {}}})
    const r = request('lab', {disks: 'annotation'})
    const decision = decide([dra], [r])
    expect(admittedClasses(decision, r)).to.deep.equal([])
    expect(reasons(decision, r)).to.deep.equal(['disks:allocation-dra'])
    expect(decision.refused.get(`${r.podUid}/main`)![0].message).to.match(/allocation DRA.*ResourceClaim of the resource\.k8s\.io DeviceClass disks\.devices\.nfdctl\.io$/)
    expect(decision.holders.size).to.equal(0)
  })

  it("refuses an annotation naming a class that does not apply to the node; a limit is always kubelet's business", function () {
    const r = request('prod', {nope: 'annotation', serial: 'limit'})
    const decision = decide([roomyClass('serial')], [r])
    expect(admittedClasses(decision, r)).to.deep.equal(['serial'])
    expect(reasons(decision, r)).to.deep.equal(['nope:unknown-class'])
  })

  it('annotation holders count against capacity after the limit holders; older pods first', function () {
    const serial = deviceClass('serial', {annotationAccess: {namespaceSelector: {}}, capacity: 3})
    const byLimit = request('prod', {serial: 'limit'})
    const older = request('lab', {serial: 'annotation'}, '2026-12-05T09:00:00Z')
    const newest = request('lab', {serial: 'annotation'}, '2026-12-05T11:00:00Z')
    const middle = request('lab', {serial: 'annotation'}, '2026-12-05T10:30:00Z')
    const decision = decide([serial], [byLimit, newest, older, middle])
    expect([byLimit, older, middle].map((r) => admittedClasses(decision, r))).to.deep.equal([['serial'], ['serial'], ['serial']])
    expect(reasons(decision, newest)).to.deep.equal(['serial:capacity'])
    expect([...decision.holders].sort()).to.deep.equal([holderKey(older, 'serial'), holderKey(middle, 'serial')].sort())
  })

  it('a holder keeps its slot ahead of an older pod that asks later; a new limit holder takes a slot from the newest annotation holder', function () {
    const serial = deviceClass('serial', {annotationAccess: {namespaceSelector: {}}, capacity: 1})
    const holder = request('lab', {serial: 'annotation'}, '2026-12-05T11:00:00Z')
    const olderAsksLater = request('lab', {serial: 'annotation'}, '2026-12-05T09:00:00Z')
    const first = decide([serial], [holder, olderAsksLater], {holders: new Set([holderKey(holder, 'serial')])})
    expect(admittedClasses(first, holder)).to.deep.equal(['serial'])
    expect(reasons(first, olderAsksLater)).to.deep.equal(['serial:capacity'])

    const byLimit = request('prod', {serial: 'limit'})
    const second = decide([serial], [holder, byLimit], {holders: first.holders as Set<string>})
    expect(admittedClasses(second, byLimit)).to.deep.equal(['serial'])
    expect(reasons(second, holder)).to.deep.equal(['serial:capacity'])
    expect(second.holders.size).to.equal(0)
  })

  it('a limit kubelet did not allocate (PodResources lists none) gives nothing', function () {
    const bound = request('prod', {serial: 'limit'})
    const decision = decide([roomyClass('serial')], [bound], {notAllocated: [bound]})
    expect(admittedClasses(decision, bound)).to.deep.equal([])
    expect(reasons(decision, bound)).to.deep.equal(['serial:not-allocated'])
  })

  it('counts limit holders that are not running yet against capacity (kubelet gave them their units)', function () {
    const serial = deviceClass('serial', {annotationAccess: {namespaceSelector: {}}, capacity: 1})
    const waiting = request('lab', {serial: 'annotation'})
    const decision = decide([serial], [waiting], {limitHolders: new Map([['serial', 1]])})
    expect(reasons(decision, waiting)).to.deep.equal(['serial:capacity'])
  })

  it('limitHoldersOf: limit requests of pods not ended, per class', function () {
    const running = {phase: 'Running', requests: [request('a', {serial: 'limit', x: 'annotation'}), request('a', {serial: 'limit'})]}
    const pending = {phase: 'Pending', requests: [request('a', {gpio: 'limit'})]}
    const ended = {phase: 'Succeeded', requests: [request('a', {serial: 'limit'})]}
    expect([...limitHoldersOf([running, pending, ended])]).to.deep.equal([
      ['serial', 2],
      ['gpio', 1],
    ])
  })

  it('one decision per container: two runtime containers of one pod container take one slot', function () {
    const serial = deviceClass('serial', {annotationAccess: {namespaceSelector: {}}, capacity: 2})
    const first = request('lab', {serial: 'annotation'})
    const other = request('lab', {serial: 'annotation'})
    const decision = decide([serial], [first, {...first}, other])
    expect([admittedClasses(decision, first), admittedClasses(decision, other)]).to.deep.equal([['serial'], ['serial']])
  })

  it('a bad annotation is refused once for the container, with what was dropped; its valid names are still judged', function () {
    const serial = roomyClass('serial', {annotationAccess: {namespaceSelector: {}}})
    const [r] = containerRequests({
      metadata: {annotations: {'devices.nfdctl.io/main': ['serial', ...Array.from({length: 40_000}, (_, i) => `nope-${i}`)].join(',')}, name: 'flood', namespace: 'lab', uid: 'u-flood'},
      spec: {containers: [{name: 'main'}]},
    })
    expect(r.classes.size).to.equal(16)
    const started = performance.now()
    const decision = decide([serial], [r])
    expect(performance.now() - started, 'ms to decide').to.be.below(50)
    expect(admittedClasses(decision, r)).to.deep.equal(['serial'])
    const refusals = decision.refused.get('u-flood/main')!
    expect(refusals.map((x) => x.reason)).to.deep.equal(['bad-annotation', ...Array.from({length: 15}, () => 'unknown-class')])
    expect(refusals[0].message).to.equal('the annotation devices.nfdctl.io/main has 40001 class names, of which only the first 16 are read; list DeviceClass names, comma-separated')
  })
})
