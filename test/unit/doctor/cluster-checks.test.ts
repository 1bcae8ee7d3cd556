import {expect} from 'chai'

import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {judgeCluster, minorOf} from '../../../src/lib/doctor/cluster-checks.js'
import {crdVersionsDigest, type ClassFacts, type ClusterFacts} from '../../../src/lib/doctor/cluster-facts.js'
import {doctorExitCode, type Finding} from '../../../src/lib/doctor/findings.js'
import {deviceClassCrd} from '../../../src/lib/devices/device-class-crd.js'

const node = (name: string, kubelet = 'v1.37.2', runtime = 'containerd://2.4.2', labels: Record<string, string> = {}, deviceAllocatable: Record<string, string> = {}) => ({
  containerRuntimeVersion: runtime,
  deviceAllocatable,
  kubeletVersion: kubelet,
  labels,
  name,
})

const deviceClass = (name: string, allocation: DeviceClass['spec']['allocation'], generation = 1, nodeSelector?: DeviceClass['spec']['nodeSelector']): DeviceClass => ({
  apiVersion: 'devices.nfdctl.io/v1alpha1',
  kind: 'DeviceClass',
  metadata: {generation, name},
  spec: {allocation, capacity: 1, match: [{subsystem: 'usb'}], nodeSelector, permissions: 'rw'},
})

/** A 1.37 cluster with default gates, the CRD current, two nodes, no classes. */
const healthy: ClusterFacts = {
  admissionPolicies: true,
  classes: [],
  crd: {state: 'current'},
  deviceTaints: 'kept',
  draDeviceClasses: ['cams.devices.nfdctl.io'],
  extendedResourceName: 'kept',
  invalidClasses: [],
  nodes: [node('a'), node('b')],
  refusedReads: [],
  resourceV1: true,
  serverVersion: 'v1.37.2',
}
/** How 1.34 and 1.35 look with their default gates. */
const gatesOff: ClusterFacts = {...healthy, deviceTaints: 'dropped', extendedResourceName: 'dropped', serverVersion: 'v1.34.4'}

const reportedBy = (...nodes: string[]): ClassFacts['reports'] => nodes.map((n) => ({lastUpdateTime: '2026-12-07T22:00:00Z', node: n, observedGeneration: 1}))
const of = (findings: Finding[], feature: Finding['feature']) => findings.filter((f) => f.feature === feature)
const statusOf = (findings: Finding[], check: string) => findings.find((f) => f.check.startsWith(check))?.status

describe('doctor: the judgements over the cluster facts', function () {
  it('a healthy 1.37 cluster: everything ok, exit 0', function () {
    const findings = judgeCluster({...healthy, classes: [{deviceClass: deviceClass('cams', 'DRA'), reports: reportedBy('a', 'b')}]})
    expect(findings.filter((f) => f.status !== 'ok')).to.deep.equal([])
    expect(doctorExitCode(findings)).to.equal(0)
  })

  it('gates off (1.34/1.35): DRA by limit fails when a DRA class exists, warns when none does; taints only warn', function () {
    const withDra = judgeCluster({...gatesOff, classes: [{deviceClass: deviceClass('cams', 'DRA'), reports: reportedBy('a', 'b')}]})
    expect(of(withDra, 'DRA by limit').map((f) => f.status)).to.deep.equal(['fail'])
    expect(of(withDra, 'DRA by limit')[0].fix).to.match(/DRAExtendedResource/)
    expect(of(withDra, 'device taints').map((f) => f.status)).to.deep.equal(['warn'])
    expect(doctorExitCode(withDra)).to.equal(1)

    const withoutDra = judgeCluster({...gatesOff, classes: [{deviceClass: deviceClass('cams', 'Device'), reports: reportedBy('a', 'b')}]})
    expect(of(withoutDra, 'DRA by limit').map((f) => f.status)).to.deep.equal(['warn'])
    expect(doctorExitCode(withoutDra)).to.equal(0)
  })

  it('a refused dry run is a warning that names the permission, never a pass or a failure', function () {
    const findings = judgeCluster({...healthy, extendedResourceName: {refused: 'POST /apis/resource.k8s.io/v1/deviceclasses: 403 Forbidden'}})
    const limit = of(findings, 'DRA by limit')[0]
    expect(limit.status).to.equal('warn')
    expect(limit.found).to.include('403')
    expect(limit.fix).to.match(/create \(dry run\)/)
  })

  it('without resource.k8s.io/v1 or with old kubelets, DRA fails only when a class uses it', function () {
    const old: ClusterFacts = {...healthy, extendedResourceName: undefined, deviceTaints: undefined, nodes: [node('a', 'v1.33.5')], resourceV1: false, serverVersion: 'v1.33.5'}
    expect(of(judgeCluster(old), 'DRA').map((f) => f.status)).to.deep.equal(['warn', 'warn', 'warn'])
    const used = judgeCluster({...old, classes: [{deviceClass: deviceClass('cams', 'DRA'), reports: reportedBy('a')}]})
    expect(
      of(used, 'DRA')
        .filter((f) => f.status === 'fail')
        .map((f) => f.check),
    ).to.deep.equal(['API server version', 'kubelet version', 'resource.k8s.io/v1 served'])
  })

  it('containerd 1.x: a warning to turn CDI on', function () {
    const findings = judgeCluster({...healthy, nodes: [node('a', 'v1.37.2', 'containerd://1.7.27')]})
    expect(statusOf(findings, 'container runtime')).to.equal('warn')
    expect(findings.find((f) => f.check === 'container runtime')?.fix).to.include('enable_cdi')
  })

  it('no CRD: the device features are not installed, a warning with the apply command; exit 0', function () {
    const findings = judgeCluster({...healthy, crd: {state: 'missing'}})
    const crd = findings.find((f) => f.check === 'DeviceClass CRD')
    expect(crd?.status).to.equal('warn')
    expect(crd?.fix).to.include('kubectl apply -f deploy/crds/deviceclasses.devices.nfdctl.io.yaml')
    expect(doctorExitCode(findings)).to.equal(0)
  })

  it('an outdated CRD fails when classes exist, warns when none does', function () {
    const outdated: ClusterFacts = {...healthy, crd: {served: ['v1alpha1'], state: 'outdated'}}
    expect(statusOf(judgeCluster(outdated), 'DeviceClass CRD')).to.equal('warn')
    expect(statusOf(judgeCluster({...outdated, classes: [{deviceClass: deviceClass('cams', 'Class'), reports: reportedBy('a', 'b')}]}), 'DeviceClass CRD')).to.equal('fail')
  })

  it('agents: selected nodes that report nowhere fail, by name; nodes behind the generation warn; unselected nodes do not count', function () {
    const nodes = [node('a', undefined, undefined, {cams: 'yes'}), node('b', undefined, undefined, {cams: 'yes'}), node('c')]
    const selector = {matchLabels: {cams: 'yes'}}
    const silent = judgeCluster({...healthy, classes: [{deviceClass: deviceClass('cams', 'Class', 1, selector), reports: reportedBy('a')}], nodes})
    const agent = silent.find((f) => f.check.startsWith('agents report class cams'))
    expect(agent?.status).to.equal('fail')
    expect(agent?.found).to.equal('1 of 2 selected nodes report class cams nowhere: b')

    const behind = judgeCluster({...healthy, classes: [{deviceClass: deviceClass('cams', 'Class', 2, selector), reports: [...reportedBy('a'), {node: 'b', observedGeneration: 2}]}], nodes})
    expect(statusOf(behind, 'agents report class cams')).to.equal('warn')
    expect(behind.find((f) => f.check.startsWith('agents report'))?.found).to.equal('a report an older generation of class cams')
  })

  it('an invalid class fails', function () {
    expect(doctorExitCode(judgeCluster({...healthy, invalidClasses: ['DeviceClass x: spec.match: must have at least 1 item']}))).to.equal(1)
  })

  it('reads minor versions as providers spell them', function () {
    expect([minorOf('v1.34.4'), minorOf('v1.37.2-eks-4f4795d'), minorOf('v1.30.1+k3s1'), minorOf('unknown')]).to.deep.equal([34, 37, 30, undefined])
  })

  it('the CRD digest sees a schema change and nothing else', function () {
    const shipped = deviceClassCrd() as {spec: {versions: Array<Record<string, unknown>>}; metadata: Record<string, unknown>}
    const same = {...shipped, metadata: {...shipped.metadata, resourceVersion: '42', uid: 'x'}}
    expect(crdVersionsDigest(same)).to.equal(crdVersionsDigest(shipped))
    const changed = structuredClone(shipped)
    ;(changed.spec.versions[0].schema as {openAPIV3Schema: {required: string[]}}).openAPIV3Schema.required = []
    expect(crdVersionsDigest(changed)).not.to.equal(crdVersionsDigest(shipped))
  })
})

describe('doctor: DRA classes published as resource.k8s.io DeviceClasses', function () {
  it('a DRA class without its resource.k8s.io DeviceClass fails, naming the DRA agent; other allocations need none', function () {
    const missing = judgeCluster({...healthy, classes: [{deviceClass: deviceClass('scopes', 'DRA'), reports: reportedBy('a', 'b')}]})
    expect(missing.find((f) => f.check === 'resource.k8s.io DeviceClass scopes.devices.nfdctl.io')).to.include({status: 'fail'})
    expect(missing.find((f) => f.check.startsWith('resource.k8s.io DeviceClass'))?.fix).to.include('--dra')
    const device = judgeCluster({...healthy, classes: [{deviceClass: deviceClass('scopes', 'Device'), reports: reportedBy('a', 'b')}]})
    expect(device.filter((f) => f.check.startsWith('resource.k8s.io DeviceClass'))).to.deep.equal([])
  })
})

describe("doctor: the agents' pods", function () {
  const classes = [{deviceClass: deviceClass('cams', 'Class', 1, {matchLabels: {cams: 'yes'}}), reports: reportedBy('a')}]
  const nodes = [node('a', undefined, undefined, {cams: 'yes'}), node('c')]
  const pod = (name: string, podNode: string, ready: boolean) => ({name, namespace: 'nfdctl-system', node: podNode, ready})

  it('a pod not Ready on a node a class selects fails, naming it; elsewhere it warns; all Ready is ok', function () {
    const onSelected = judgeCluster({...healthy, agentPods: [pod('agent-1', 'a', false), pod('agent-2', 'c', true)], classes, nodes})
    expect(onSelected.find((f) => f.check === 'agent pods ready')).to.include({found: '1 of 2 agent pods not Ready: nfdctl-system/agent-1 on a', status: 'fail'})
    const elsewhere = judgeCluster({...healthy, agentPods: [pod('agent-1', 'a', true), pod('agent-2', 'c', false)], classes, nodes})
    expect(elsewhere.find((f) => f.check === 'agent pods ready')?.status).to.equal('warn')
    const ready = judgeCluster({...healthy, agentPods: [pod('agent-1', 'a', true)], classes, nodes})
    expect(ready.find((f) => f.check === 'agent pods ready')).to.include({found: '1 agent pods ready', status: 'ok'})
  })

  it('no class: the pods are not judged', function () {
    expect(judgeCluster({...healthy, agentPods: [pod('agent-1', 'a', false)]}).filter((f) => f.check === 'agent pods ready')).to.deep.equal([])
  })
})

describe('doctor: reads the server refused', function () {
  it('each fails, naming what to grant; the checks that needed it are left out', function () {
    const findings = judgeCluster({
      ...healthy,
      classes: [{deviceClass: deviceClass('cams', 'Class'), reports: reportedBy('a')}],
      crd: undefined,
      nodes: undefined,
      refusedReads: [
        {message: 'GET /api/v1/nodes: 403 Forbidden', what: 'nodes'},
        {message: 'GET …customresourcedefinitions/…: 403 Forbidden', what: 'customresourcedefinitions'},
      ],
    })
    expect(findings.filter((f) => f.check.startsWith('read ')).map((f) => [f.check, f.status])).to.deep.equal([
      ['read nodes', 'fail'],
      ['read customresourcedefinitions', 'fail'],
    ])
    expect(findings.find((f) => f.check === 'read nodes')?.fix).to.equal('grant get and list on nodes to the user doctor runs as (a read-only ClusterRole)')
    expect(findings.filter((f) => f.check === 'kubelet version' || f.check === 'DeviceClass CRD')).to.deep.equal([])
    expect(findings.find((f) => f.check.startsWith('agents report class cams'))).to.include({found: '1 nodes report class cams; which nodes it selects is unknown', status: 'warn'})
    expect(doctorExitCode(findings), 'what doctor cannot read it cannot call working').to.equal(1)
  })
})

describe('doctor: an API server that emulates an older minor', function () {
  it('is judged as that minor and says so', function () {
    const findings = judgeCluster({...healthy, emulatedMinor: 33, serverVersion: 'v1.37.2'})
    expect(findings.find((f) => f.feature === 'gc')?.found).to.equal('API server v1.37.2 (emulating 1.33)')
    expect(findings.find((f) => f.feature === 'DRA' && f.check === 'API server version')?.status).to.equal('warn')
    expect(judgeCluster({...healthy, emulatedMinor: 37}).find((f) => f.feature === 'gc')?.found).to.equal('API server v1.37.2')
  })
})

describe('doctor: a DRA class a node still lists as a device-plugin resource', function () {
  const cams = [{deviceClass: deviceClass('cams', 'DRA'), reports: reportedBy('a', 'b')}]
  const listedAt = (capacity: string) => [node('a', 'v1.34.4', undefined, {}, {'devices.nfdctl.io/cams': capacity}), node('b', 'v1.34.4')]

  it('1.34 with DRAExtendedResource on: a node listing it at 0 (a device plugin served it before) fails, with the patch that removes it', function () {
    const findings = judgeCluster({...healthy, classes: cams, nodes: listedAt('0'), serverVersion: 'v1.34.4'})
    const stale = findings.find((f) => f.check === 'pods asking by limit reach DRA (devices.nfdctl.io/cams)')
    expect(stale).to.include({feature: 'DRA by limit', status: 'fail'})
    expect(stale?.found).to.match(/^a list devices.nfdctl.io\/cams at 0 allocatable/)
    expect(stale?.fix).to.include(`kubectl patch node a --subresource=status --type=json -p '[{"op":"remove","path":"/status/capacity/devices.nfdctl.io~1cams"},`)
    expect(doctorExitCode(findings)).to.equal(1)
  })

  it('1.35 on, a listing at 0 routes nothing away from DRA; one above 0 does on every release', function () {
    expect(judgeCluster({...healthy, classes: cams, nodes: listedAt('0'), serverVersion: 'v1.35.4'}).filter((f) => f.check.startsWith('pods asking by limit'))).to.deep.equal([])
    const served = judgeCluster({...healthy, classes: cams, nodes: listedAt('2')}).find((f) => f.check.startsWith('pods asking by limit'))
    expect(served).to.include({found: "a (2) advertise devices.nfdctl.io/cams by device plugin, so pods asking by limit get the plugin's devices, not DRA's", status: 'fail'})
  })

  it('where extendedResourceName is dropped no limit reaches DRA anyway: only the dropped field is said', function () {
    const findings = judgeCluster({...gatesOff, classes: cams, nodes: listedAt('0')})
    expect(findings.filter((f) => f.check.startsWith('pods asking by limit'))).to.deep.equal([])
  })
})
