import {expect} from 'chai'
import {mkdtemp, readFile, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {claimCdiFile, claimMarkerPath} from '../../../src/lib/dra/claim-cdi.js'
import {ClaimLifecycle} from '../../../src/lib/dra/claim-lifecycle.js'
import {ClaimSpecs} from '../../../src/lib/dra/claim-specs.js'
import {createDraMetrics} from '../../../src/lib/dra/dra-metrics.js'
import {PreparedClaims} from '../../../src/lib/dra/prepared-claims.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'
import {allocatedClaim, claimRef, draNameOf, extendedResourceClaim} from '../../support/dra-claims.js'
import {FakeClaimApi} from '../../support/fake-claim-api.js'
import {recordingLogger} from '../../support/recording-logger.js'

const node = 'worker-1'
const serial = deviceClass('serial', {allocation: 'DRA', permissions: 'rw'})
const deviceA = loopDevice(1, {ID_SERIAL_SHORT: 'serial-a'})
const deviceB = loopDevice(2, {ID_SERIAL_SHORT: 'serial-b'})
const uidA = 'aaaaaaaa-0000-0000-0000-000000000001'
const uidB = 'bbbbbbbb-0000-0000-0000-000000000002'

describe('ClaimLifecycle', function () {
  let dir: string
  let api: FakeClaimApi
  let present: Device[]
  let registry: Registry
  let metrics: ReturnType<typeof createDraMetrics>
  let told: string[]
  let log: ReturnType<typeof recordingLogger>

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-claims-'))
    api = new FakeClaimApi()
    present = [deviceA, deviceB]
    registry = new Registry()
    metrics = createDraMetrics(registry)
    told = []
    log = recordingLogger()
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  const cdiDir = (): string => join(dir, 'cdi')
  const stateDir = (): string => join(dir, 'state')

  function lifecycle(record = new PreparedClaims(stateDir())): ClaimLifecycle {
    return new ClaimLifecycle({
      health: {push: () => void told.push('health'), takeBack: (claim) => void told.push(`take back ${claim.name}`), writeStatuses: () => void told.push('statuses')},
      logger: log,
      members: {classes: [serial], of: (name) => (name === 'serial' ? present : [])},
      metrics,
      nodeName: node,
      onClaimsChanged: () => void told.push('claims changed'),
      pool: () => new Map(present.map((d) => [draNameOf(d), d])),
      readClaim: api.read,
      record,
      specs: new ClaimSpecs(cdiDir()),
    })
  }

  const specOf = async (uid: string): Promise<string | undefined> => readFile(claimCdiFile(cdiDir(), uid), 'utf8').catch(() => undefined)
  const errorsOf = async (kind: string): Promise<number> => Number(new RegExp(`kind="${kind}"} (\\d+)`).exec(await registry.getSingleMetricAsString('nfdctl_dra_errors_total'))?.[1] ?? 0)

  it("prepares a claim: recorded before kubelet's answer, its CDI spec written, the agent and kubelet told", async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const claims = lifecycle()
    const response = await claims.prepare([claimRef(uidA, 'a')])
    expect(response.claims[uidA]).to.deep.equal({
      devices: [{cdi_device_ids: [`dra.devices.nfdctl.io/claim=${uidA}-${draNameOf(deviceA)}`], device_name: draNameOf(deviceA), pool_name: node, request_names: ['dev']}],
      error: '',
    })
    expect(told).to.deep.equal(['claims changed', 'health', 'statuses'])
    expect(claims.claims().map((c) => c.uid)).to.deep.equal([uidA])
    const reloaded = new PreparedClaims(stateDir())
    await reloaded.load()
    expect(reloaded.get(uidA)?.devices.map((d) => d.device)).to.deep.equal([draNameOf(deviceA)])
    expect(await specOf(uidA))
      .to.include(deviceA.devNode)
      .and.include(claimMarkerPath(uidA, draNameOf(deviceA)))
  })

  it('a runtime that would not hand the devices over: every claim of the call is refused with why, nothing recorded or written', async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const claims = new ClaimLifecycle({...lifecycle().options, refusal: async () => 'the container runtime has CDI off'})
    const response = await claims.prepare([claimRef(uidA, 'a')])
    expect(response.claims[uidA]).to.deep.equal({devices: [], error: `node ${node}: the container runtime has CDI off`})
    expect(claims.claims()).to.deep.equal([])
    expect(await specOf(uidA)).to.equal(undefined)
    expect(told).to.deep.equal([])
  })

  it('prepare and unprepare of one claim never interleave: unprepare waits for the prepare before it, and wins', async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const release = api.hold('lab', 'a')
    const claims = lifecycle()
    const order: string[] = []
    const preparing = claims.prepare([claimRef(uidA, 'a')]).then(() => void order.push('prepared'))
    const unpreparing = claims.unprepare([claimRef(uidA, 'a')]).then(() => void order.push('unprepared'))
    await sleep(50)
    expect(order, 'unprepare answered while the prepare before it still runs').to.deep.equal([])
    release()
    await Promise.all([preparing, unpreparing])
    expect(order).to.deep.equal(['prepared', 'unprepared'])
    expect(claims.claims()).to.deep.equal([])
    expect(await specOf(uidA)).to.equal(undefined)
    expect(log.lines.map((l) => l.msg).filter((m) => m.startsWith('claim '))).to.deep.equal(['claim prepared', 'claim unprepared'])
  })

  it('different claims are not held up by each other', async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    api.put(allocatedClaim(uidB, 'b', deviceB, 'serial', node))
    const release = api.hold('lab', 'a')
    const claims = lifecycle()
    const preparingA = claims.prepare([claimRef(uidA, 'a')])
    const b = await claims.prepare([claimRef(uidB, 'b')])
    expect(b.claims[uidB].error).to.equal('')
    release()
    expect((await preparingA).claims[uidA].error).to.equal('')
  })

  it('a recorded claim is answered from the record, the API server not asked, its spec written again for the devices present', async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const first = lifecycle()
    await first.prepare([claimRef(uidA, 'a')])
    await rm(cdiDir(), {force: true, recursive: true}) // a reboot: /var/run/cdi is gone, the record is not
    api.fail('lab', 'a', new Error('the API server is away'))
    const reads = api.reads.length
    const again = lifecycle()
    await again.load()
    const response = await again.prepare([claimRef(uidA, 'a')])
    expect(response.claims[uidA].error).to.equal('')
    expect(response.claims[uidA].devices.map((d) => d.device_name)).to.deep.equal([draNameOf(deviceA)])
    expect(api.reads.length).to.equal(reads)
    expect(await specOf(uidA)).to.include(deviceA.devNode)
  })

  it('a claim whose request tolerates the unplugged taint: prepared with its unplugged device (the pool lists it), whose CDI entry is its marker as the null device until it is back', async function () {
    const claim = allocatedClaim(uidA, 'a', deviceB, 'serial', node)
    const request = claim.spec!.devices!.requests![0]
    api.put({...claim, spec: {devices: {requests: [{...request, exactly: {...request.exactly, tolerations: [{key: 'devices.nfdctl.io/unplugged', operator: 'Exists'}]}}]}}})
    present = [deviceA]
    const claims = new ClaimLifecycle({...lifecycle().options, unplugged: () => new Map([[draNameOf(deviceB), {classes: ['serial'], device: deviceB}]])})
    const response = await claims.prepare([claimRef(uidA, 'a')])
    expect(response.claims[uidA].error).to.equal('')
    const marker = claimMarkerPath(uidA, draNameOf(deviceB))
    const nodes = (): Promise<Array<{path: string; hostPath: string}>> =>
      specOf(uidA).then((text) => JSON.parse(text!).devices.flatMap((d: {containerEdits: {deviceNodes: unknown[]}}) => d.containerEdits.deviceNodes))
    expect(await nodes()).to.deep.equal([{hostPath: '/dev/null', major: 1, minor: 3, path: marker, permissions: 'rw', type: 'c'}])
    present = [deviceA, deviceB]
    await claims.refreshSpecs()
    expect((await nodes()).map((n) => [n.path, n.hostPath])).to.deep.equal([
      [deviceB.devNode, deviceB.devNode],
      [marker, deviceB.devNode],
    ])
  })

  it('gone claims are dropped once asked: deleted, or made again under another UID; one still there, or not answered for, is kept', async function () {
    const uidGone = 'cccccccc-0000-0000-0000-000000000003'
    const uidAgain = 'dddddddd-0000-0000-0000-000000000004'
    for (const [uid, name] of [
      [uidA, 'kept'],
      [uidB, 'unknown'],
      [uidGone, 'gone'],
      [uidAgain, 'again'],
    ])
      api.put(allocatedClaim(uid, name, deviceA, 'serial', node))
    const claims = lifecycle()
    await claims.prepare([claimRef(uidA, 'kept'), claimRef(uidB, 'unknown'), claimRef(uidGone, 'gone'), claimRef(uidAgain, 'again')])
    expect(claims.claims()).to.have.length(4)
    // The API server after a while: `gone` deleted, `again` deleted and made again, `unknown` not answered for.
    const fresh = new FakeClaimApi()
    fresh.put(allocatedClaim(uidA, 'kept', deviceA, 'serial', node))
    fresh.put(allocatedClaim('eeeeeeee-0000-0000-0000-000000000005', 'again', deviceA, 'serial', node))
    fresh.fail('lab', 'unknown', new Error('503 Service Unavailable'))
    api = fresh
    const restarted = lifecycle()
    await restarted.load()
    await restarted.forgetGone()
    expect(
      restarted
        .claims()
        .map((c) => c.name)
        .sort(),
    ).to.deep.equal(['kept', 'unknown'])
    expect(await specOf(uidGone)).to.equal(undefined)
    expect(await specOf(uidAgain)).to.equal(undefined)
    expect(await specOf(uidA)).to.not.equal(undefined)
    expect(log.lines.filter((l) => l.msg.startsWith('recorded claim no longer exists')).map((l) => l.fields.claim)).to.have.members(['lab/gone', 'lab/again'])
  })

  it("an error of one claim is that claim's answer: the others in the call are prepared, and nothing throws", async function () {
    const uidMissing = 'ffffffff-0000-0000-0000-000000000006'
    const uidPending = '99999999-0000-0000-0000-000000000007'
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    api.put({...allocatedClaim(uidPending, 'pending', deviceA, 'serial', node), status: undefined})
    const claims = lifecycle()
    const response = await claims.prepare([claimRef('../../etc', 'bad'), claimRef(uidMissing, 'missing'), claimRef(uidPending, 'pending'), claimRef(uidA, 'a')])
    expect(response.claims['../../etc'].error).to.equal('claim lab/bad has no valid UID ("../../etc")')
    expect(response.claims[uidMissing].error).to.equal('ResourceClaim lab/missing does not exist')
    expect(response.claims[uidPending].error).to.equal('ResourceClaim lab/pending is not allocated yet')
    expect(response.claims[uidA]).to.deep.include({error: ''})
    expect(await errorsOf('prepare')).to.equal(3)
    expect(claims.claims().map((c) => c.uid)).to.deep.equal([uidA])
  })

  it("unprepare: a claim whose record cannot be written is that claim's error; the rest are answered", async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const claims = lifecycle()
    await claims.prepare([claimRef(uidA, 'a')])
    await rm(stateDir(), {force: true, recursive: true})
    await writeFile(stateDir(), 'not a directory')
    const response = await claims.unprepare([claimRef(uidA, 'a'), claimRef(uidB, 'never-prepared')])
    expect(response.claims[uidA].error).to.match(/EEXIST|ENOTDIR/)
    expect(response.claims[uidB].error).to.equal('')
    expect(await errorsOf('unprepare')).to.equal(1)
    expect(await stat(claimCdiFile(cdiDir(), uidA)).then(() => true)).to.equal(true)
  })

  it('claimed(): the devices of the claims prepared here that a container carries the markers of, by class', async function () {
    api.put(allocatedClaim(uidA, 'a', deviceA, 'serial', node))
    const claims = lifecycle()
    await claims.prepare([claimRef(uidA, 'a')])
    const container = (paths: string[]) => ({id: 'c1', labels: {}, spec: {linux: {devices: paths.map((path) => ({path}))}}})
    expect(claims.claimed(container([deviceA.devNode, claimMarkerPath(uidA, draNameOf(deviceA))]))).to.deep.equal(new Map([['serial', [stableDeviceId(deviceA)]]]))
    expect(claims.claimed(container([claimMarkerPath(uidB, draNameOf(deviceA)), claimMarkerPath(uidA, draNameOf(deviceB))]))).to.equal(undefined)
    expect(claims.claimed({id: 'c2', labels: {}})).to.equal(undefined)
  })

  it("prepares the claim kube-scheduler makes for a pod's limit devices.nfdctl.io/<class>: one CDI device per device under the request the pod's status maps to its container, which then holds both", async function () {
    const made = extendedResourceClaim(uidA, 'web-0', [deviceA, deviceB], 'serial', node)
    api.put(made)
    const claims = lifecycle()
    const response = await claims.prepare([claimRef(uidA, made.metadata.name)])
    // kubelet gives a container the CDI devices of the requests its pod's status.extendedResourceClaimStatus maps to it.
    expect(response.claims[uidA]).to.deep.equal({
      devices: [deviceA, deviceB].map((d) => ({
        cdi_device_ids: [`dra.devices.nfdctl.io/claim=${uidA}-${draNameOf(d)}`],
        device_name: draNameOf(d),
        pool_name: node,
        request_names: ['container-0-request-0'],
      })),
      error: '',
    })
    expect(claims.claims()[0]).to.deep.include({name: 'web-0-extended-resources-x7k2p', pods: [`pod-${uidA}`]})
    const container = {id: 'c1', labels: {}, spec: {linux: {devices: [deviceA, deviceB].map((d) => ({path: claimMarkerPath(uidA, draNameOf(d))}))}}}
    expect(claims.claimed(container)).to.deep.equal(new Map([['serial', [stableDeviceId(deviceA), stableDeviceId(deviceB)]]]))
  })
})
