import {join} from 'node:path'

import {expect} from 'chai'

import {repoRoot} from '../controlplane/paths.js'
import {chartTools, kustomize, renderChart, type Tools} from '../support/chart.js'
import type {Manifest} from '../support/manifests.js'

// The kustomize trees of deploy/ and charts/nfdctl describe the same workloads: each tree is rendered with
// `kubectl kustomize` and the chart with values that enable the same components, and what the pods run with
// is compared after names, namespaces, labels and the image are put aside. A difference fails with one line
// per differing field, so whoever changes one side sees what to carry over to the other.

type Json = Record<string, unknown>

const workloadKinds = new Set(['CronJob', 'DaemonSet', 'Deployment'])
const policyKinds = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'])
const containerFields = ['args', 'env', 'ports', 'livenessProbe', 'readinessProbe', 'startupProbe', 'resources', 'securityContext', 'volumeMounts'] as const
const podFields = ['hostPID', 'hostNetwork', 'securityContext', 'priorityClassName', 'tolerations', 'nodeSelector', 'affinity', 'volumes', 'restartPolicy', 'terminationGracePeriodSeconds'] as const

/** The chart's release in these renders: another name and namespace than deploy/'s, so both are really put aside. */
const release = {name: 'drift', namespace: 'drift-system', prefix: 'drift-nfdctl-'}
const kustomizePrefix = 'nfdctl-'

interface Side {
  readonly objects: readonly Manifest[]
  /** What every object name starts with: deploy/'s nfdctl-, the release's <fullname>-. */
  readonly prefix: string
}

interface Options {
  /** Compare only what ClusterRoleBindings grant (see the CronJob case). */
  readonly clusterGrantsOnly?: boolean
}

const stripPrefix = (name: string, prefix: string): string => (name.startsWith(prefix) ? name.slice(prefix.length) : `${name} (not named ${prefix}…)`)

/** A rule as one readable line, its lists sorted: `cluster: list,watch nodes ("")`. */
const ruleLine = (scope: string, rule: Json): string => {
  const sorted = (list: unknown): string[] => [...((list as string[] | undefined) ?? [])].sort()
  const names = rule.resourceNames === undefined ? '' : ` named ${sorted(rule.resourceNames).join(',')}`
  const urls = rule.nonResourceURLs === undefined ? '' : ` URLs ${sorted(rule.nonResourceURLs).join(',')}`
  return `${scope}: ${sorted(rule.verbs).join(',')} ${sorted(rule.resources).join(',')} (${sorted(rule.apiGroups)
    .map((g) => JSON.stringify(g))
    .join(',')})${names}${urls}`
}

/** What the bindings of a render grant one service account: `scope` is cluster, or the namespace relative to the workload's. */
function grants(side: Side, serviceAccount: string, namespace: string, options: Options): string[] {
  const rules: string[] = []
  for (const binding of side.objects) {
    if (binding.kind !== 'ClusterRoleBinding' && (binding.kind !== 'RoleBinding' || options.clusterGrantsOnly)) continue
    const bindingNamespace = binding.metadata.namespace
    const subjects = (binding.subjects as Array<{kind: string; name: string; namespace?: string}>) ?? []
    // A RoleBinding's service account without a namespace is in the binding's namespace (as the authorizer reads it).
    const bound = subjects.some((s) => s.kind === 'ServiceAccount' && s.name === serviceAccount && (s.namespace ?? bindingNamespace) === namespace)
    if (!bound) continue
    const ref = binding.roleRef as {kind: string; name: string}
    const scope = binding.kind === 'ClusterRoleBinding' ? 'cluster' : bindingNamespace === namespace ? "the workload's namespace" : `namespace ${bindingNamespace}`
    const role = side.objects.find((o) => o.kind === ref.kind && o.metadata.name === ref.name && (ref.kind === 'ClusterRole' || o.metadata.namespace === bindingNamespace))
    if (role === undefined) {
      rules.push(`${binding.kind} ${stripPrefix(binding.metadata.name, side.prefix)} names ${ref.kind} ${stripPrefix(ref.name, side.prefix)}, which is not in the render`)
      continue
    }
    for (const rule of (role.rules as Json[]) ?? []) rules.push(ruleLine(scope, rule))
  }
  return rules.sort()
}

const pick = (object: Json | undefined, fields: readonly string[]): Json => Object.fromEntries(fields.filter((f) => object?.[f] !== undefined).map((f) => [f, object![f]]))

/** Everything compared of one render, keyed `<kind> <name without prefix>`. */
function driftView(side: Side, options: Options = {}): Record<string, Json> {
  const view: Record<string, Json> = {}
  const agent = side.objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === `${side.prefix}agent`)
  for (const object of side.objects) {
    const key = `${object.kind} ${stripPrefix(object.metadata.name, side.prefix)}`
    if (workloadKinds.has(object.kind)) view[key] = workloadView(side, object, options)
    if (policyKinds.has(object.kind)) view[key] = policyView(side, object, agent)
    if (object.kind === 'PodDisruptionBudget') view[key] = object.spec as Json
  }
  // A selector of a workload's own pods (a PodDisruptionBudget's, an anti-affinity term's) names them by
  // their labels, which differ by design: it counts as the same when it selects the same workload.
  const ownPods = new Map<string, string>()
  for (const workload of side.objects.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet')) {
    const matchLabels = ((workload.spec as Json).selector as Json | undefined)?.matchLabels
    if (matchLabels !== undefined) ownPods.set(canonical(matchLabels), `<the pods of ${workload.kind} ${stripPrefix(workload.metadata.name, side.prefix)}>`)
  }
  return replaceSelectors(view, ownPods) as Record<string, Json>
}

/** JSON with object keys sorted, so equal objects give equal text whatever order their keys came in. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v))
}

function replaceSelectors(value: unknown, ownPods: ReadonlyMap<string, string>): unknown {
  if (Array.isArray(value)) return value.map((v) => replaceSelectors(v, ownPods))
  if (typeof value !== 'object' || value === null) return value
  const own = ownPods.get(canonical(value))
  if (own !== undefined) return own
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceSelectors(v, ownPods)]))
}

function workloadView(side: Side, workload: Manifest, options: Options): Json {
  const spec = workload.spec as Json
  const job = workload.kind === 'CronJob' ? ((spec.jobTemplate as Json).spec as Json) : undefined
  const template = ((job ?? spec).template as Json) ?? {}
  const pod = (template.spec as Json) ?? {}
  const namespace = workload.metadata.namespace ?? ''
  const serviceAccount = (pod.serviceAccountName as string | undefined) ?? 'default'
  const accountExists = side.objects.some((o) => o.kind === 'ServiceAccount' && o.metadata.name === serviceAccount && o.metadata.namespace === namespace)
  const containers = ((pod.containers as Json[]) ?? []).map((c) => ({name: c.name, ...pick(c, containerFields), image: c.image === undefined ? 'none' : '<the image>'}))
  return {
    containers,
    pod: pick(pod, podFields),
    podAnnotations: ((template.metadata as Json | undefined)?.annotations as Json | undefined) ?? {},
    serviceAccount: {
      exists: accountExists ? 'a ServiceAccount of the render, in the workload namespace' : `none: ${serviceAccount} is not in the render`,
      grants: grants(side, serviceAccount, namespace, options),
    },
    workload: {
      ...pick(spec, ['replicas', 'updateStrategy', 'schedule', 'concurrencyPolicy', 'successfulJobsHistoryLimit', 'failedJobsHistoryLimit']),
      ...pick(job, ['backoffLimit', 'activeDeadlineSeconds']),
    },
  }
}

/** A policy's or binding's spec, with the agent's service account user and the name prefix put aside. */
function policyView(side: Side, policy: Manifest, agent: Manifest | undefined): Json {
  let text = JSON.stringify(policy.spec)
  if (agent !== undefined) {
    const account = ((agent.spec as Json).template as {spec: {serviceAccountName?: string}}).spec.serviceAccountName ?? 'default'
    text = text.replaceAll(`system:serviceaccount:${agent.metadata.namespace}:${account}`, "system:serviceaccount:<the agent's namespace>:<the agent's service account>")
  }
  const spec = collapseWhitespace(JSON.parse(text)) as Json
  if (typeof spec.policyName === 'string') spec.policyName = stripPrefix(spec.policyName, side.prefix)
  return spec
}

/**
 * Strings with each run of white space made one space. kustomize re-folds the policies' `>-` blocks (a line
 * break before a more-indented line comes out as a blank line), and CEL reads any white space between tokens
 * alike; the messages in them are folded to single spaces by YAML anyway.
 */
function collapseWhitespace(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(/\s+/g, ' ').trim()
  if (Array.isArray(value)) return value.map(collapseWhitespace)
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, collapseWhitespace(v)]))
  return value
}

/** One line per differing leaf: `<path>: kustomize <value>, chart <value>`. */
function differences(kustomized: unknown, charted: unknown, path = ''): string[] {
  if (JSON.stringify(kustomized) === JSON.stringify(charted)) return []
  const plain = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
  if (plain(kustomized) && plain(charted)) {
    const keys = [...new Set([...Object.keys(kustomized), ...Object.keys(charted)])].sort()
    return keys.flatMap((k) => differences(kustomized[k], charted[k], path === '' ? k : `${path}.${k}`))
  }
  if (Array.isArray(kustomized) && Array.isArray(charted)) {
    // Lists of named items (containers, volumes, mounts, env, ports) are compared item by name, then by order.
    const names = (list: unknown[]): string[] | undefined => {
      const found = list.map((v) => (plain(v) && typeof v.name === 'string' ? v.name : undefined))
      return found.every((n) => n !== undefined) && new Set(found).size === found.length ? (found as string[]) : undefined
    }
    const [kNames, cNames] = [names(kustomized), names(charted)]
    if (kNames !== undefined && cNames !== undefined) {
      const byName = (list: unknown[], name: string): unknown => list.find((v) => (v as Json).name === name)
      const all = [...new Set([...kNames, ...cNames])]
      const items = all.flatMap((n) => differences(byName(kustomized, n), byName(charted, n), `${path}[${n}]`))
      const common = (a: string[], b: string[]): string[] => a.filter((n) => b.includes(n))
      const order = JSON.stringify(common(kNames, cNames)) === JSON.stringify(common(cNames, kNames)) ? [] : [`${path} order: kustomize ${kNames.join(', ')}; chart ${cNames.join(', ')}`]
      return [...items, ...order]
    }
    if (kustomized.length === charted.length) return kustomized.flatMap((v, i) => differences(v, charted[i], `${path}[${i}]`))
  }
  const show = (v: unknown): string => (v === undefined ? '(absent)' : JSON.stringify(v))
  return [`${path}: kustomize ${show(kustomized)}, chart ${show(charted)}`]
}

describe('deploy/ and charts/nfdctl do not drift: the workloads both produce', function () {
  let tools: Tools

  before(async function () {
    tools = await chartTools(this)
  })

  const cases: Array<{tree: string; values: Json; options?: Options}> = [
    {tree: 'deploy/gc', values: {'admissionPolicies.enable': false, 'agent.enable': false}},
    {
      // deploy/gc/rbac's leader-election Role serves the Deployment and the CronJob alike there; the chart
      // leaves it out when the CronJob runs alone, as `gc once` takes no Lease. Its cluster rules are compared.
      options: {clusterGrantsOnly: true},
      tree: 'deploy/gc/cronjob',
      values: {'admissionPolicies.enable': false, 'agent.enable': false, 'gc.cronJob.enable': true},
    },
    {tree: 'deploy/agent', values: {'gc.enable': false}},
    {
      tree: 'deploy/plugins',
      values: {'admissionPolicies.enable': false, 'agent.enable': false, 'gc.enable': false, 'plugins.enable': true},
    },
  ]

  for (const {options, tree, values} of cases) {
    it(`${tree} and the chart with ${Object.entries(values)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`, async function () {
      const kustomized = driftView({objects: await kustomize(tools, join(repoRoot, tree)), prefix: kustomizePrefix}, options)
      const charted = driftView({objects: (await renderChart(tools, {namespace: release.namespace, release: release.name, values})).objects, prefix: release.prefix}, options)
      expect(
        Object.keys(kustomized).filter((k) => k.startsWith('Deployment') || k.startsWith('DaemonSet') || k.startsWith('CronJob')),
        'workloads of the tree',
      ).to.have.length(1)
      const found = differences(kustomized, charted)
      if (found.length > 0) expect.fail(`${tree} and charts/nfdctl differ (change one to match the other):\n  ${found.join('\n  ')}`)
    })
  }

  it('the comparison sees a changed flag, a lost volume, a widened rule, a moved host path and an unbound service account', async function () {
    const values = {'gc.enable': false}
    const base = (await renderChart(tools, {namespace: release.namespace, release: release.name, values})).objects
    const changed = (await renderChart(tools, {namespace: release.namespace, release: release.name, values: {...values, 'agent.hostPaths.stateDir': '/srv/nfdctl'}})).objects
    const daemonSet = changed.find((o) => o.kind === 'DaemonSet') as Json
    const pod = ((daemonSet.spec as Json).template as Json).spec as {containers: Json[]; volumes: Json[]}
    pod.containers[0].args = [...(pod.containers[0].args as string[]).slice(0, -1), '--log-format=text']
    pod.volumes = pod.volumes.filter((v) => v.name !== 'udev')
    const role = changed.find((o) => o.kind === 'ClusterRole') as Json
    ;(role.rules as Array<{verbs: string[]}>)[0].verbs.push('delete')
    const found = differences(driftView({objects: base, prefix: release.prefix}), driftView({objects: changed, prefix: release.prefix}))
    expect(found).to.include('DaemonSet agent.containers[agent].args[5]: kustomize "--log-format=json", chart "--log-format=text"')
    expect(found).to.include('DaemonSet agent.pod.volumes[udev]: kustomize {"name":"udev","hostPath":{"path":"/run/udev","type":"DirectoryOrCreate"}}, chart (absent)')
    expect(found).to.include('DaemonSet agent.pod.volumes[state].hostPath.path: kustomize "/var/lib/nfdctl", chart "/srv/nfdctl"')
    expect(found).to.include(
      'DaemonSet agent.serviceAccount.grants[1]: kustomize "cluster: get,list,watch deviceclasses (\\"devices.nfdctl.io\\")", chart "cluster: delete,get,list,watch deviceclasses (\\"devices.nfdctl.io\\")"',
    )
    expect(found).to.have.length(4)

    const unbound = changed.filter((o) => o.kind !== 'ServiceAccount')
    expect(differences(driftView({objects: base, prefix: release.prefix}), driftView({objects: unbound, prefix: release.prefix}))).to.include(
      'DaemonSet agent.serviceAccount.exists: kustomize "a ServiceAccount of the render, in the workload namespace", chart "none: drift-nfdctl-agent is not in the render"',
    )
  })
})
