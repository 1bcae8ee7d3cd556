import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {existsSync} from 'node:fs'
import {promisify} from 'node:util'

import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import type {DoctorReport, Finding} from '../../src/lib/doctor/findings.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {startControlPlane} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {installedCli} from '../support/installed-cli.js'
import {clusterGates, describeWhere, kubeMinor, kubeVersion} from '../support/kube-version.js'
import {nfdctl} from '../support/run-cli.js'

const mergePatch = 'application/merge-patch+json'
const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deviceclasses.devices.nfdctl.io'

/** Registers a Node object as a kubelet would (no kubelet runs: doctor reads only the API). */
async function addNode(client: KubeClient, name: string, labels: Record<string, string> = {}): Promise<void> {
  await client.request('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {labels, name}}})
  const nodeInfo = {
    architecture: 'amd64',
    bootID: 'b',
    containerRuntimeVersion: 'containerd://2.4.2',
    kernelVersion: '6.1.0',
    kubeProxyVersion: '',
    kubeletVersion: kubeVersion,
    machineID: 'm',
    operatingSystem: 'linux',
    osImage: 'Debian',
    systemUUID: 's',
  }
  await client.request('PATCH', `/api/v1/nodes/${name}/status`, {body: {status: {nodeInfo}}, contentType: mergePatch})
}

/** An agent's report of a class on a node, as status-writer.ts writes it. */
async function report(client: KubeClient, className: string, nodes: readonly string[]): Promise<void> {
  const entries = nodes.map((node) => ({lastUpdateTime: '2026-12-07T22:00:00Z', node, observedGeneration: 1}))
  await client.request('PATCH', `${deviceClassesPath}/${className}/status`, {body: {status: {nodes: entries}}, contentType: mergePatch})
}

async function doctor(kubeconfig: string): Promise<{exitCode: number; findings: readonly Finding[]; stdout: string}> {
  const run = await nfdctl<DoctorReport>(['doctor', '--kubeconfig', kubeconfig, '-o', 'json'])
  if (run.error) throw run.error
  return {exitCode: run.exitCode, findings: (JSON.parse(run.stdout) as DoctorReport).findings, stdout: run.stdout}
}

/** The resource.k8s.io DeviceClass the agent with --dra publishes for a DRA class. */
async function publishDraClass(client: KubeClient, className: string): Promise<void> {
  const name = `${className}.devices.nfdctl.io`
  await client.request('POST', '/apis/resource.k8s.io/v1/deviceclasses', {body: {apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: {name}, spec: {}}})
}

const statuses = (findings: readonly Finding[], feature: Finding['feature']) => findings.filter((f) => f.feature === feature).map((f) => f.status)

/** What a release's default gates make of the DRA class the tests create: asked by limit, it fails where extendedResourceName is dropped. */
const droppedByDefault = clusterGates.extendedResource ? [] : ['DRA by limit']

describe(`nfdctl doctor against kube-apiserver ${kubeVersion}: tells a current cluster from an older one and from one without the CRD`, function () {
  describe(`default gates (${kubeVersion})`, function () {
    let plane: ControlPlane
    let client: KubeClient

    before(async function () {
      plane = await startControlPlane(this)
      client = await plane.client()
      await addNode(client, 'cam-1', {cams: 'yes'})
      await addNode(client, 'cam-2', {cams: 'yes'})
      await addNode(client, 'other')
      await client.request('POST', deviceClassesPath, {body: deviceClassManifest('cams', {allocation: 'DRA', nodeSelector: {matchLabels: {cams: 'yes'}}})})
    })

    after(() => client?.close())

    it(`the dry runs find extendedResourceName and device taints ${clusterGates.extendedResource ? 'kept' : 'dropped'}; a selected node without its agent fails, by name`, async function () {
      await report(client, 'cams', ['cam-1'])
      const {exitCode, findings} = await doctor(plane.kubeconfig)
      expect(statuses(findings, 'DRA by limit')).to.deep.equal([clusterGates.extendedResource ? 'ok' : 'fail'])
      expect(statuses(findings, 'device taints')).to.deep.equal([clusterGates.deviceTaints ? 'ok' : 'warn'])
      expect(statuses(findings, 'admission policies')).to.deep.equal(['ok'])
      expect(findings.find((f) => f.check === 'DeviceClass CRD')?.status).to.equal('ok')
      expect(findings.find((f) => f.check === 'API server version')?.found).to.equal(`API server ${kubeVersion}`)
      expect(findings.find((f) => f.check === 'kubelet version')).to.include({found: `kubelets ${kubeVersion}`, status: 'ok'})
      const agents = findings.find((f) => f.check.startsWith('agents report class cams'))
      expect(agents).to.include({found: '1 of 2 selected nodes report class cams nowhere: cam-2', status: 'fail'})
      expect(findings.find((f) => f.check === 'resource.k8s.io DeviceClass cams.devices.nfdctl.io')).to.include({status: 'fail'})
      expect(exitCode).to.equal(1)
      // Dry runs persist nothing.
      const kept = await client.request<{items: Array<{metadata: {name: string}}>}>('GET', '/apis/resource.k8s.io/v1/deviceclasses')
      expect(kept.items.map((c) => c.metadata.name).filter((n) => n.startsWith('nfdctl-doctor'))).to.deep.equal([])
    })

    it(`every selected node reporting: nothing fails${droppedByDefault.length > 0 ? ' but DRA by limit' : ''}, exit ${droppedByDefault.length > 0 ? 1 : 0}; the table says so`, async function () {
      await report(client, 'cams', ['cam-1', 'cam-2'])
      await publishDraClass(client, 'cams')
      const {exitCode, findings} = await doctor(plane.kubeconfig)
      expect(findings.find((f) => f.check === 'resource.k8s.io DeviceClass cams.devices.nfdctl.io')).to.include({status: 'ok'})
      expect(findings.filter((f) => f.status === 'fail').map((f) => f.feature)).to.deep.equal(droppedByDefault)
      expect(exitCode).to.equal(droppedByDefault.length > 0 ? 1 : 0)
      const table = await nfdctl(['doctor', '--kubeconfig', plane.kubeconfig])
      expect(table.stdout).to.match(/^FEATURE\s+STATUS\s+CHECK\s+FOUND/)
      expect(table.stdout).to.match(new RegExp(`: ${droppedByDefault.length} failed, \\d+ warnings, \\d+ ok\\n?$`))
    })

    it(`the installed CLI has doctor: the same verdict, exit ${droppedByDefault.length > 0 ? 1 : 0}, as a process`, async function () {
      this.timeout(120_000) // the installed package is compiled once per run
      const cli = await installedCli()
      const run = await promisify(execFile)(process.execPath, [cli.bin, 'doctor', '--kubeconfig', plane.kubeconfig]).then(
        ({stdout}) => ({code: 0, stdout}),
        (error: {code: number; stdout: string}) => ({code: error.code, stdout: error.stdout}),
      )
      expect(run.stdout).to.match(/^FEATURE\s+STATUS\s+CHECK\s+FOUND/)
      expect(run.stdout).to.match(new RegExp(`: ${droppedByDefault.length} failed, \\d+ warnings, \\d+ ok\\n$`))
      expect(run.code).to.equal(droppedByDefault.length > 0 ? 1 : 0)
    })

    it("--node adds this host as the agent needs it, read by the agent's own host check", async function () {
      const run = await nfdctl<DoctorReport>(['doctor', '--kubeconfig', plane.kubeconfig, '--node', '--containerd-address', '/nonexistent/containerd.sock', '-o', 'json'])
      const findings = (JSON.parse(run.stdout) as DoctorReport).findings
      const mode = existsSync('/sys/fs/cgroup/cgroup.controllers') ? /^cgroup v2/ : /^cgroup v1/
      expect(findings.find((f) => f.check === 'cgroup mode')?.found).to.match(mode)
      expect(findings.find((f) => f.check === 'containerd answers')).to.include({status: 'warn'})
      expect(findings.find((f) => f.check === 'containerd answers')?.found).to.include('/nonexistent/containerd.sock')
    })

    it('without create permission the dry runs are warnings that say so, not a crash', async function () {
      const readOnly = {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: 'doctor-read'}, rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['get', 'list']}]}
      await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {body: readOnly})
      const binding = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: {name: 'doctor-read'},
        roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'doctor-read'},
        subjects: [{apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'doctor-reader'}],
      }
      await client.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {body: binding})
      const {findings} = await doctor(await plane.kubeconfigFor('doctor-reader'))
      for (const feature of ['DRA by limit', 'device taints'] as const) {
        const finding = findings.find((f) => f.feature === feature)
        expect(finding?.status).to.equal('warn')
        expect(finding?.found).to.include('403')
      }
    })

    it('a user who may read nothing: each refused read fails, naming what to grant, exit 1, no crash', async function () {
      const {exitCode, findings} = await doctor(await plane.kubeconfigFor('doctor-nobody'))
      expect(findings.filter((f) => f.check.startsWith('read ')).map((f) => f.check)).to.have.members([
        'read nodes',
        'read customresourcedefinitions',
        'read deviceclasses.devices.nfdctl.io',
        'read deviceclasses.resource.k8s.io',
        'read pods',
      ])
      expect(findings.filter((f) => f.status === 'fail').map((f) => f.check)).to.have.members(findings.filter((f) => f.check.startsWith('read ')).map((f) => f.check))
      expect(exitCode).to.equal(1)
    })

    it('an agent pod not Ready on a node a class selects fails, naming the pod', async function () {
      await client.request('POST', '/api/v1/namespaces', {body: {apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'nfdctl-system'}}})
      await client.request('POST', '/api/v1/namespaces/nfdctl-system/serviceaccounts', {body: {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'default'}}})
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {labels: {'app.kubernetes.io/name': 'nfdctl-agent'}, name: 'nfdctl-agent-x1'},
        spec: {automountServiceAccountToken: false, containers: [{image: 'nfdctl:test', name: 'agent'}], nodeName: 'cam-2'},
      }
      await client.request('POST', '/api/v1/namespaces/nfdctl-system/pods', {body: pod})
      const {exitCode, findings} = await doctor(plane.kubeconfig)
      expect(findings.find((f) => f.check === 'agent pods ready')).to.include({found: '1 of 1 agent pods not Ready: nfdctl-system/nfdctl-agent-x1 on cam-2', status: 'fail'})
      expect(exitCode).to.equal(1)
    })

    it('an edited CRD is outdated and fails while classes exist, with the apply command', async function () {
      const crd = await client.request<{spec: {versions: Array<{schema: {openAPIV3Schema: {description?: string}}}>}}>('GET', crdPath)
      crd.spec.versions[0].schema.openAPIV3Schema.description = 'edited by hand'
      await client.request('PUT', crdPath, {body: crd})
      const {exitCode, findings} = await doctor(plane.kubeconfig)
      expect(findings.find((f) => f.check === 'DeviceClass CRD')).to.include({fix: 'kubectl apply -f deploy/crds/deviceclasses.devices.nfdctl.io.yaml', status: 'fail'})
      expect(exitCode).to.equal(1)
    })
  })

  // From 1.36 the API server emulating 1.34 looks as 1.34 and 1.35 do by default; before it, it is one, unless
  // its gates are turned on (then nothing here drops what the suite needs dropped).
  const emulating = kubeMinor >= 36 ? ' (emulating 1.34)' : ''
  describeWhere(kubeMinor >= 36 || !clusterGates.extendedResource, 'DRAExtendedResource is turned on')(
    `${emulating ? 'emulating 1.34' : kubeVersion} (how 1.34 and 1.35 look by default), then without the CRD`,
    function () {
      let plane: ControlPlane
      let client: KubeClient

      before(async function () {
        plane = await startControlPlane(this, emulating ? ['--emulated-version=1.34'] : [])
        client = await plane.client()
        await addNode(client, 'cam-1')
        await client.request('POST', deviceClassesPath, {body: deviceClassManifest('cams', {allocation: 'DRA'})})
        await report(client, 'cams', ['cam-1'])
        await publishDraClass(client, 'cams')
      })

      after(() => client?.close())

      it('the dry runs find extendedResourceName and taints dropped: DRA by limit fails (a DRA class exists), taints warn', async function () {
        const {exitCode, findings} = await doctor(plane.kubeconfig)
        expect(findings.find((f) => f.feature === 'DRA by limit')).to.include({status: 'fail'})
        expect(findings.find((f) => f.feature === 'DRA by limit')?.fix).to.include('DRAExtendedResource')
        expect(statuses(findings, 'device taints')).to.deep.equal(['warn'])
        expect(statuses(findings, 'DRA')).to.not.include('fail')
        expect(findings.find((f) => f.check === 'API server version')?.found).to.equal(`API server ${kubeVersion}${emulating}`)
        expect(exitCode).to.equal(1)
      })

      it('without the CRD: the device features are not installed, a warning with the apply command, exit 0', async function () {
        await client.request('DELETE', crdPath)
        const {exitCode, findings} = await doctor(plane.kubeconfig)
        const crd = findings.find((f) => f.check === 'DeviceClass CRD')
        expect(crd?.status).to.equal('warn')
        expect(crd?.found).to.match(/not installed/)
        expect(findings.filter((f) => f.check.startsWith('agents report'))).to.deep.equal([])
        // No class can use DRA by limit without the CRD: what the server drops is a warning.
        expect(statuses(findings, 'DRA by limit')).to.deep.equal(['warn'])
        expect(exitCode).to.equal(0)
      })
    },
  )
})
