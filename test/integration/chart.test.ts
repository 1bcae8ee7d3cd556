import {readdir, readFile, writeFile, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'
import {parse} from 'yaml'

import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import type {Manifest} from '../../harness/controlplane/manifests.js'
import {runToEnd} from '../../harness/process/run-to-end.js'
import {chartDir, chartTools, deployDir, helm, prometheusOperatorCrds, type RenderOptions, renderChart, templateArgs, type Tools} from '../support/chart.js'
import {startControlPlane} from '../support/cluster.js'
import {missingPrerequisite} from '../support/prerequisites.js'

// charts/nfdctl as an operator installs it: helm lint, helm template with the default values and with a
// values file that turns every option on, each object sent to a real kube-apiserver as a server-side apply
// dry run with strict field validation (the CRDs it needs applied for real first), and the settings the
// chart refuses. That its workloads match deploy/ is test/integration/chart-drift.test.ts.

const everything = fileURLToPath(new URL('../fixtures/chart/everything.yaml', import.meta.url))
const packageJson = fileURLToPath(new URL('../../package.json', import.meta.url))

type Json = Record<string, unknown>

/** The renders checked against the API server: between them every template of the chart renders something. */
const renders: Record<string, {options: RenderOptions; kinds: Record<string, number>}> = {
  'the default values': {
    kinds: {
      ClusterRole: 2,
      ClusterRoleBinding: 2,
      DaemonSet: 1,
      Deployment: 1,
      PodDisruptionBudget: 1,
      Role: 1,
      RoleBinding: 1,
      ServiceAccount: 2,
      ValidatingAdmissionPolicy: 2,
      ValidatingAdmissionPolicyBinding: 2,
    },
    options: {},
  },
  'everything.yaml': {
    kinds: {ClusterRole: 2, ClusterRoleBinding: 2, CronJob: 1, DaemonSet: 1, DeviceClass: 2, PodMonitor: 1, ServiceAccount: 2, ValidatingAdmissionPolicy: 2, ValidatingAdmissionPolicyBinding: 2},
    options: {valuesFiles: [everything]},
  },
  // The agent's DRA driver too (everything.yaml turns it on): its ClusterRole, binding and three policies.
  'everything.yaml with the agent and the gc Deployment back on': {
    kinds: {
      ClusterRole: 3,
      ClusterRoleBinding: 3,
      DaemonSet: 1,
      Deployment: 1,
      DeviceClass: 2,
      PodDisruptionBudget: 1,
      PodMonitor: 1,
      Role: 1,
      RoleBinding: 1,
      Service: 1,
      ServiceAccount: 2,
      ServiceMonitor: 1,
      ValidatingAdmissionPolicy: 5,
      ValidatingAdmissionPolicyBinding: 5,
    },
    options: {values: {'agent.enable': true, 'gc.cronJob.enable': false, 'plugins.enable': false}, valuesFiles: [everything]},
  },
}

const countKinds = (objects: readonly Manifest[]): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const {kind} of objects) counts[kind] = (counts[kind] ?? 0) + 1
  return counts
}

const only = (objects: readonly Manifest[], kind: string): Json => {
  const found = objects.filter((o) => o.kind === kind)
  expect(found, `objects of kind ${kind}`).to.have.length(1)
  return found[0] as Json
}

/** The pod spec of a Deployment, DaemonSet or CronJob. */
const podSpec = (workload: Json): Json => {
  const spec = workload.spec as Json
  const template = (workload.kind === 'CronJob' ? ((spec.jobTemplate as Json).spec as Json).template : spec.template) as Json
  return template.spec as Json
}
const container = (workload: Json): Json => (podSpec(workload).containers as Json[])[0]
/** A list of named items (volumes, mounts) as `{name: the rest}`. */
const byName = (list: unknown): Record<string, Json> => Object.fromEntries((list as Json[]).map(({name, ...rest}) => [name as string, rest]))
const identities = (objects: readonly Manifest[]): string[] => objects.map((o) => `${o.kind} ${o.metadata.name}`)

describe('charts/nfdctl: helm lint, helm template, and a server-side dry run on a real kube-apiserver', function () {
  let tools: Tools

  before(async function () {
    tools = await chartTools(this)
  })

  it("Chart.yaml: version and appVersion are package.json's version", async function () {
    const {version} = JSON.parse(await readFile(packageJson, 'utf8')) as {version: string}
    const chart = parse(await readFile(join(chartDir, 'Chart.yaml'), 'utf8')) as {name: string; version: string; appVersion: string}
    expect({appVersion: chart.appVersion, name: chart.name, version: chart.version}).to.deep.equal({appVersion: version, name: 'nfdctl', version})
  })

  it("crds/: nfdctl's own CRDs of deploy/crds/, byte for byte; not NFD's, which NFD's chart installs", async function () {
    const chartCrds = (await readdir(join(chartDir, 'crds'))).sort()
    const ours: string[] = []
    for (const file of (await readdir(join(deployDir, 'crds'))).sort()) {
      const crd = parse(await readFile(join(deployDir, 'crds', file), 'utf8')) as {spec: {group: string}}
      if (crd.spec.group.endsWith('nfdctl.io')) ours.push(file)
    }
    expect(ours, 'nfdctl CRDs in deploy/crds').to.not.be.empty
    expect(chartCrds).to.deep.equal(ours)
    for (const file of ours) {
      const [inChart, inDeploy] = await Promise.all([readFile(join(chartDir, 'crds', file)), readFile(join(deployDir, 'crds', file))])
      expect(inChart.equals(inDeploy), `charts/nfdctl/crds/${file} differs from deploy/crds/${file}: cp deploy/crds/${file} charts/nfdctl/crds/`).to.equal(true)
    }
  })

  for (const [what, args] of [
    ['the default values', []],
    ['everything.yaml', ['--values', everything]],
  ] as const) {
    it(`helm lint --strict passes with ${what}`, async function () {
      const result = await helm(tools, ['lint', '--strict', chartDir, ...args])
      expect(result.code, `${result.stdout}${result.stderr}`).to.equal(0)
      expect(result.stdout).to.include('1 chart(s) linted, 0 chart(s) failed')
    })
  }

  it('every template renders an object in one of the checked renders', async function () {
    const rendered = new Set<string>()
    for (const {options} of Object.values(renders)) for (const source of (await renderChart(tools, options)).sources) rendered.add(source)
    // validate.yaml renders nothing by design: it fails a render (tested below).
    const templates = (await readdir(join(chartDir, 'templates'))).filter((f) => f.endsWith('.yaml') && f !== 'validate.yaml')
    expect(templates.filter((t) => !rendered.has(`nfdctl/templates/${t}`))).to.deep.equal([])
  })

  describe('values', function () {
    it('image: repository:appVersion by default, the tag when given, repository@digest when a digest is given (it wins over a tag)', async function () {
      const images = async (values: Json): Promise<string[]> => {
        const {objects} = await renderChart(tools, {values: {'gc.cronJob.enable': false, ...values}})
        return objects.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet').map((w) => container(w as Json).image as string)
      }
      const digest = `sha256:${'ab'.repeat(32)}`
      expect(await images({})).to.deep.equal(['ghcr.io/nfdctl/nfdctl:0.1.0', 'ghcr.io/nfdctl/nfdctl:0.1.0'])
      expect(await images({'image.tag': '0.1.0-rc.1'})).to.deep.equal(['ghcr.io/nfdctl/nfdctl:0.1.0-rc.1', 'ghcr.io/nfdctl/nfdctl:0.1.0-rc.1'])
      expect(await images({'image.digest': digest, 'image.repository': 'registry.test/nfdctl', 'image.tag': 'ignored'})).to.deep.equal([
        `registry.test/nfdctl@${digest}`,
        `registry.test/nfdctl@${digest}`,
      ])
    })

    it("agent.hostPaths move the host side of the agent's volumes; the container keeps its paths and flags", async function () {
      const defaults = only((await renderChart(tools)).objects, 'DaemonSet')
      // everything.yaml's DRA driver adds volumes and flags of its own (the next test).
      const moved = only((await renderChart(tools, {valuesFiles: [everything], values: {'agent.dra.enable': false, 'agent.enable': true, 'plugins.enable': false}})).objects, 'DaemonSet')
      const hostPaths = (w: Json): Record<string, string> => Object.fromEntries((podSpec(w).volumes as Array<{name: string; hostPath: {path: string}}>).map((v) => [v.name, v.hostPath.path]))
      expect(hostPaths(moved)).to.deep.equal({
        ...hostPaths(defaults),
        cdi: '/etc/cdi',
        containerd: '/run/k3s/containerd',
        'pod-resources': '/data/kubelet/pod-resources',
        state: '/data/nfdctl',
      })
      // --cdi in extraArgs brings the CDI directory, which an agent that writes no CDI spec does not mount.
      expect(container(moved).volumeMounts).to.deep.equal([...(container(defaults).volumeMounts as Json[]), {mountPath: '/var/run/cdi', name: 'cdi'}])
      expect(hostPaths(defaults)).to.not.have.property('cdi')
      expect(container(moved).args).to.deep.equal([...(container(defaults).args as string[]), '--workers=8', '--cdi'])
    })

    for (const component of ['agent', 'plugins'] as const) {
      it(`every ${component}.hostPaths value moves the host side of one volume, and only that`, async function () {
        // --cdi, so that the agent mounts its CDI directory (agent.hostPaths.cdiDir).
        const enabled = {agent: {'agent.extraArgs': ['--cdi']}, plugins: {'agent.enable': false, 'plugins.enable': true}}[component]
        const values = parse(await readFile(join(chartDir, 'values.yaml'), 'utf8')) as Record<string, {hostPaths: Record<string, string>}>
        const keys = Object.keys(values[component].hostPaths)
        expect(keys, `${component}.hostPaths in values.yaml`).to.not.be.empty
        const volumes = async (set: Json): Promise<Record<string, string>> => {
          const daemonSet = (await renderChart(tools, {values: {...enabled, 'gc.enable': false, ...set}})).objects.find((o) => o.kind === 'DaemonSet') as Json
          return Object.fromEntries((podSpec(daemonSet).volumes as Array<{name: string; hostPath: {path: string}}>).map((v) => [v.name, v.hostPath.path]))
        }
        const defaults = await volumes({})
        const moved = new Set<string>()
        for (const key of keys) {
          const after = await volumes({[`${component}.hostPaths.${key}`]: `/srv/${key}`})
          const changed = Object.keys(defaults).filter((name) => after[name] !== defaults[name])
          expect(changed, `${component}.hostPaths.${key} moves one volume`).to.have.length(1)
          expect(after[changed[0]], `${component}.hostPaths.${key}`).to.equal(`/srv/${key}`)
          expect(defaults[changed[0]], `${component}.hostPaths.${key}'s default`).to.equal(values[component].hostPaths[key])
          moved.add(changed[0])
        }
        // Every other host path is the kernel's interface, the same on every node.
        expect(
          Object.keys(defaults)
            .filter((name) => !moved.has(name))
            .map((name) => defaults[name])
            .sort(),
        ).to.deep.equal(component === 'agent' ? ['/dev', '/sys', '/sys/fs/cgroup'] : [])
      })
    }

    it("agent.dra: --dra and --kubelet-dir, kubelet's plugin directories at the host's paths in the container too, a role and policies of their own; none of it by default", async function () {
      const render = async (values: Json): Promise<Manifest[]> => (await renderChart(tools, {values: {'gc.enable': false, ...values}})).objects
      const plain = await render({})
      const dra = await render({'agent.dra.enable': true, 'agent.dra.kubeletDir': '/data/kubelet'})
      const [before, after] = [only(plain, 'DaemonSet'), only(dra, 'DaemonSet')]
      // kubelet dials the socket path the driver registers: host path, mount path and --kubelet-dir agree.
      expect(container(after).args).to.deep.equal([...(container(before).args as string[]), '--dra', '--kubelet-dir=/data/kubelet'])
      // The claims' CDI specs go to --cdi-dir's default, which the cdi volume (agent.hostPaths.cdiDir) is: mounted
      // for the driver, not for an agent that writes no CDI spec.
      expect(byName(podSpec(after).volumes)).to.deep.equal({
        ...byName(podSpec(before).volumes),
        cdi: {hostPath: {path: '/var/run/cdi', type: 'DirectoryOrCreate'}},
        'dra-plugin': {hostPath: {path: '/data/kubelet/plugins/devices.nfdctl.io', type: 'DirectoryOrCreate'}},
        'plugins-registry': {hostPath: {path: '/data/kubelet/plugins_registry', type: 'Directory'}},
      })
      expect(byName(container(after).volumeMounts)).to.deep.equal({
        ...byName(container(before).volumeMounts),
        cdi: {mountPath: '/var/run/cdi'},
        'dra-plugin': {mountPath: '/data/kubelet/plugins/devices.nfdctl.io'},
        'plugins-registry': {mountPath: '/data/kubelet/plugins_registry'},
      })
      expect(byName(container(before).volumeMounts)).to.not.have.property('cdi')

      const added = async (values: Json): Promise<string[]> => {
        const objects = await render({'agent.dra.enable': true, ...values})
        return identities(objects)
          .filter((id) => !identities(plain).includes(id))
          .sort()
      }
      expect(await added({})).to.deep.equal([
        'ClusterRole nfdctl-agent-dra',
        'ClusterRoleBinding nfdctl-agent-dra',
        'ValidatingAdmissionPolicy nfdctl-agent-dra-device-classes',
        'ValidatingAdmissionPolicy nfdctl-agent-own-node-claims',
        'ValidatingAdmissionPolicy nfdctl-agent-own-node-slices',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-dra-device-classes',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-claims',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-slices',
      ])
      expect(await added({'agent.rbac.create': false}), 'agent.rbac.create=false').to.deep.equal([
        'ValidatingAdmissionPolicy nfdctl-agent-dra-device-classes',
        'ValidatingAdmissionPolicy nfdctl-agent-own-node-claims',
        'ValidatingAdmissionPolicy nfdctl-agent-own-node-slices',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-dra-device-classes',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-claims',
        'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-slices',
      ])
      expect(await added({'admissionPolicies.enable': false}), 'admissionPolicies.enable=false').to.deep.equal(['ClusterRole nfdctl-agent-dra', 'ClusterRoleBinding nfdctl-agent-dra'])
      expect(
        identities(await render({'agent.dra.enable': true, 'agent.enable': false})).filter((id) => id.includes('dra') || id.includes('slices')),
        'agent.enable=false',
      ).to.deep.equal([])

      const binding = dra.find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'nfdctl-agent-dra') as Json
      expect(binding.subjects).to.deep.equal([{kind: 'ServiceAccount', name: podSpec(after).serviceAccountName, namespace: 'nfdctl-system'}])
      // Claims' device status for its own node's claims only: associated-node verbs, never arbitrary-node.
      const role = dra.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'nfdctl-agent-dra') as Json
      expect((role.rules as Json[]).filter((r) => (r.resources as string[]).includes('resourceclaims/driver'))).to.deep.equal([
        {apiGroups: ['resource.k8s.io'], resourceNames: ['devices.nfdctl.io'], resources: ['resourceclaims/driver'], verbs: ['associated-node:patch']},
      ])
    })

    it("the agent's policies (own-node status, and with agent.dra.enable own-node slices and claims and the driver's DeviceClasses) name its service account in the release namespace", async function () {
      const {objects} = await renderChart(tools, {namespace: 'edge', release: 'devices', values: {'agent.dra.enable': true, 'agent.serviceAccount.name': 'node-agent'}})
      const policies = objects.filter((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name.startsWith('devices-nfdctl-agent-'))
      expect(policies.map((p) => p.metadata.name).sort()).to.deep.equal([
        'devices-nfdctl-agent-dra-device-classes',
        'devices-nfdctl-agent-own-node-claims',
        'devices-nfdctl-agent-own-node-slices',
        'devices-nfdctl-agent-own-node-status',
      ])
      for (const policy of policies) {
        const conditions = (policy.spec as Json).matchConditions as Array<{expression: string}>
        expect(
          conditions.map((c) => c.expression),
          policy.metadata.name,
        ).to.deep.equal(["request.userInfo.username == 'system:serviceaccount:edge:node-agent'"])
      }
      expect(only(objects, 'DaemonSet').metadata).to.include({name: 'devices-nfdctl-agent', namespace: 'edge'})
      expect(podSpec(only(objects, 'DaemonSet')).serviceAccountName).to.equal('node-agent')
    })

    // Each refused setting: the values, and what helm's one-line message must say.
    const refused: Array<[string, Json, string]> = [
      [
        'agent and plugins both enabled',
        {'plugins.enable': true},
        "agent.enable and plugins.enable are both true: the agent serves the classes' device plugins itself, so choose one (--set plugins.enable=false, or --set agent.enable=false)",
      ],
      ['several gc replicas without leader election', {'gc.leaderElect': false}, 'gc.replicaCount is 2 but gc.leaderElect is false'],
      ['a PodDisruptionBudget that could never let a collector go', {'gc.replicaCount': 1}, 'gc.pdb.minAvailable (1) is not below gc.replicaCount (1)'],
      ['both PodDisruptionBudget bounds', {'gc.pdb.maxUnavailable': 1}, 'gc.pdb.minAvailable and gc.pdb.maxUnavailable are both set'],
      ['an image digest that is not one', {'image.digest': 'latest'}, 'image.digest "latest" is not a digest'],
      ['a misspelt value (the values schema)', {'agent.enabled': false}, "additional properties 'enabled' not allowed"],
      ['a kubelet directory that is not an absolute path (the values schema)', {'agent.dra.kubeletDir': 'var/lib/kubelet'}, "'var/lib/kubelet' does not match pattern"],
    ]
    for (const [what, values, message] of refused) {
      it(`helm template refuses ${what}, in one line`, async function () {
        const result = await helm(tools, templateArgs({values}))
        expect(result.code, result.stdout).to.not.equal(0)
        const line = result.stderr.split('\n').find((l) => l.includes(message))
        expect(line, `helm's error output:\n${result.stderr}`).to.not.equal(undefined)
      })
    }
  })

  describe('on a real kube-apiserver', function () {
    let plane: ControlPlane
    let work: string

    const kubectl = (args: readonly string[]) => runToEnd(tools.kubectl, [`--kubeconfig=${plane.kubeconfig}`, `--cache-dir=${join(work, 'kube-cache')}`, ...args])

    before(async function () {
      this.timeout(5 * 60_000)
      plane = await startControlPlane(this)
      work = await mkdtemp(join(tmpdir(), 'nfdctl-chart-'))
      // The CRDs a release needs exist before its objects: the chart's own (as `helm install` applies crds/
      // first) and prometheus-operator's, whose objects the monitors are.
      const monitorCrds = await prometheusOperatorCrds().catch((error: Error) => missingPrerequisite(this, `prometheus-operator's CRDs could not be downloaded: ${error.message}`))
      const crds = [...(await readdir(join(chartDir, 'crds'))).map((f) => join(chartDir, 'crds', f)), ...monitorCrds]
      const applied = await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=nfdctl-chart-test', ...crds.flatMap((f) => ['-f', f])])
      expect(applied.code, applied.stderr).to.equal(0)
      const names = applied.stdout.match(/customresourcedefinition\.apiextensions\.k8s\.io\/\S+/g) ?? []
      expect(names, applied.stdout).to.have.length(crds.length)
      const established = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...names])
      expect(established.code, established.stderr).to.equal(0)
      const namespace = await kubectl(['create', 'namespace', 'nfdctl-system'])
      expect(namespace.code, namespace.stderr).to.equal(0)
    })

    after(async function () {
      if (work !== undefined) await rm(work, {force: true, recursive: true})
    })

    for (const [what, {kinds, options}] of Object.entries(renders)) {
      it(`${what}: every object is accepted by a server-side apply dry run with strict field validation`, async function () {
        const render = await renderChart(tools, options)
        expect(countKinds(render.objects)).to.deep.equal(kinds)
        const file = join(work, 'render.yaml')
        await writeFile(file, render.text)
        const result = await kubectl(['apply', '--server-side', '--dry-run=server', '--validate=strict', '--field-manager=nfdctl-chart-test', '--namespace=nfdctl-system', '-f', file])
        expect(result.code, `kubectl apply said:\n${result.stderr}${result.stdout}`).to.equal(0)
        // One line per object: each one reached the API server.
        const accepted = result.stdout.split('\n').filter((line) => line.endsWith('serverside-applied (server dry run)'))
        expect(accepted, result.stdout).to.have.length(render.objects.length)
      })
    }
  })
})
