import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {expect} from 'chai'

import type {Manifest} from '../../harness/controlplane/manifests.js'
import {repoRoot} from '../../harness/controlplane/paths.js'
import {chartTools, kustomize, renderChart, type Tools} from '../support/chart.js'

// The kustomize trees of deploy/ and charts/nfdctl describe the same workloads: each tree is rendered with
// `kubectl kustomize` and the chart with values that enable the same components, and every object of both is
// compared whole, after only what differs by design is put aside (deniedByDesign below): names, namespaces,
// the chart's own labels and selectors, the image and how it is pulled, the service account's name (compared
// instead by what it resolves to and what it is granted). A field either side adds is a difference, so a
// field nobody thought of is caught too. A difference fails with one line per differing field, so whoever
// changes one side sees what to carry over to the other.

type Json = Record<string, unknown>

const workloadKinds = new Set(['CronJob', 'DaemonSet', 'Deployment', 'Job', 'ReplicaSet', 'StatefulSet'])
const policyKinds = new Set(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'])
const rbacKinds = new Set(['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'])

/** The chart's release in these renders: another name and namespace than deploy/'s, so both are really put aside. */
const release = {name: 'drift', namespace: 'drift-system', prefix: 'drift-nfdctl-'}
const kustomizePrefix = 'nfdctl-'
const helmDoc = join(repoRoot, 'docs', 'helm.md')

interface Side {
  readonly objects: readonly Manifest[]
  /** What every object name starts with: deploy/'s nfdctl-, the release's <fullname>-. */
  readonly prefix: string
  /**
   * The labels of the workloads' namespace where the render has no Namespace of its own: the chart's
   * release namespace, which Helm users label as docs/helm.md says.
   */
  readonly namespaceLabels?: Json
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

/**
 * The object with its metadata put aside but for what is not the chart's own: name (the view's key),
 * namespace (the release's) and labels (the chart labels every object) go; annotations and the rest stay.
 */
function withoutOwnMetadata(object: Manifest): Json {
  const copy = structuredClone(object) as Json
  const {labels: _labels, name: _name, namespace: _namespace, ...rest} = object.metadata as Json
  if (Object.keys(rest).length === 0) delete copy.metadata
  else copy.metadata = rest
  return copy
}

/** The namespace of a render's workloads (every namespaced object of these trees is in it). */
const workloadNamespace = (side: Side): string | undefined => side.objects.find((o) => workloadKinds.has(o.kind))?.metadata.namespace

/** Everything compared of one render, keyed `<kind> <name without prefix>`. */
function driftView(side: Side, options: Options = {}): Record<string, unknown> {
  const view: Record<string, unknown> = {}
  const agent = side.objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === `${side.prefix}agent`)
  const namespace = workloadNamespace(side)
  for (const object of side.objects) {
    if (object.kind === 'Namespace' && object.metadata.name === namespace) {
      // Its name is the kustomization's, as the release namespace is the chart's: its labels (Pod Security
      // Admission's) are what the workloads need of it.
      view["the workloads' Namespace"] = withNamespaceLabels(object)
      continue
    }
    if (options.clusterGrantsOnly && (object.kind === 'Role' || object.kind === 'RoleBinding')) continue
    const key = `${object.kind} ${stripPrefix(object.metadata.name, side.prefix)}`
    if (workloadKinds.has(object.kind)) view[key] = workloadView(side, object, options)
    else if (policyKinds.has(object.kind)) view[key] = policyView(side, object, agent)
    else if (rbacKinds.has(object.kind)) view[key] = rbacView(object)
    else view[key] = withoutOwnMetadata(object)
  }
  if (side.namespaceLabels !== undefined && view["the workloads' Namespace"] === undefined)
    view["the workloads' Namespace"] = {apiVersion: 'v1', kind: 'Namespace', metadata: {labels: side.namespaceLabels}}
  // A selector of a workload's own pods (its own, a PodDisruptionBudget's, an anti-affinity term's) names
  // them by their labels, which differ by design: it counts as the same when it selects the same workload.
  const ownPods = new Map<string, string>()
  for (const workload of side.objects.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet' || o.kind === 'StatefulSet')) {
    const matchLabels = ((workload.spec as Json).selector as Json | undefined)?.matchLabels
    if (matchLabels !== undefined) ownPods.set(canonical(matchLabels), `<the pods of ${workload.kind} ${stripPrefix(workload.metadata.name, side.prefix)}>`)
  }
  return replaceSelectors(view, ownPods) as Record<string, unknown>
}

/** A Namespace as kustomize renders it: its labels are the point, so they stay. */
function withNamespaceLabels(namespace: Manifest): Json {
  const {name: _name, ...metadata} = namespace.metadata as Json
  return {...(structuredClone(namespace) as Json), metadata}
}

/**
 * The labels docs/helm.md's `kubectl label namespace` command gives the release namespace (the chart does
 * not own it, so it cannot carry them), as `{key: value}`; undefined when the page has no such command.
 */
async function documentedNamespaceLabels(): Promise<Json | undefined> {
  const text = (await readFile(helmDoc, 'utf8')).replaceAll('\\\n', ' ')
  const command = text.split('\n').find((line) => /^\s*kubectl label (namespace|ns) /.test(line))
  if (command === undefined) return undefined
  const labels = command
    .trim()
    .split(/\s+/)
    .filter((word) => /^[\w./-]+=[\w.-]*$/.test(word) && !word.startsWith('-'))
  return Object.fromEntries(labels.map((l) => l.split('=') as [string, string]))
}

/** Roles and bindings: the rules and whom they bind are compared as what each workload's service account is granted. */
function rbacView(object: Manifest): Json {
  const view = withoutOwnMetadata(object)
  for (const field of ['rules', 'roleRef', 'subjects']) if (view[field] !== undefined) view[field] = "<compared in the grants of the workloads' service accounts>"
  return view
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

/**
 * What differs between the two renders by design, put aside in each workload: the image and how it is pulled
 * (a value of the chart, a kustomize `images:` edit of deploy/), the pod template's labels (the chart's own
 * selector labels; they must match the selector, which the API server checks) and the service account's name
 * (compared by what it resolves to instead).
 */
function deniedByDesign(pod: Json, template: Json): void {
  for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
    for (const container of (pod[list] as Json[] | undefined) ?? []) {
      container.image = container.image === undefined ? 'none' : '<the image>'
      delete container.imagePullPolicy
    }
  }
  delete pod.imagePullSecrets
  delete pod.serviceAccountName
  delete pod.serviceAccount
  const metadata = template.metadata as Json | undefined
  if (metadata !== undefined) {
    delete metadata.labels
    if (Object.keys(metadata).length === 0) delete template.metadata
  }
}

function workloadView(side: Side, workload: Manifest, options: Options): Json {
  const view = withoutOwnMetadata(workload)
  const spec = view.spec as Json
  const jobTemplate = spec.jobTemplate as Json | undefined
  const template = ((jobTemplate?.spec as Json | undefined) ?? spec).template as Json
  const pod = template.spec as Json
  const namespace = workload.metadata.namespace ?? ''
  const serviceAccount = (pod.serviceAccountName as string | undefined) ?? 'default'
  const accountExists = side.objects.some((o) => o.kind === 'ServiceAccount' && o.metadata.name === serviceAccount && o.metadata.namespace === namespace)
  deniedByDesign(pod, template)
  // A CronJob's Job template: the chart's labels on the Jobs it makes are its own too.
  if (jobTemplate !== undefined) deniedByDesign({}, jobTemplate)
  return {
    ...view,
    serviceAccount: {
      exists: accountExists ? 'a ServiceAccount of the render, in the workload namespace' : `none: ${serviceAccount} is not in the render`,
      grants: grants(side, serviceAccount, namespace, options),
    },
  }
}

/** A policy or binding whole, with the agent's service account user and the name prefix put aside. */
function policyView(side: Side, policy: Manifest, agent: Manifest | undefined): Json {
  let text = JSON.stringify(withoutOwnMetadata(policy))
  if (agent !== undefined) {
    const account = ((agent.spec as Json).template as {spec: {serviceAccountName?: string}}).spec.serviceAccountName ?? 'default'
    text = text.replaceAll(`system:serviceaccount:${agent.metadata.namespace}:${account}`, "system:serviceaccount:<the agent's namespace>:<the agent's service account>")
  }
  const view = collapseWhitespace(JSON.parse(text)) as Json
  const spec = view.spec as Json
  if (typeof spec.policyName === 'string') spec.policyName = stripPrefix(spec.policyName, side.prefix)
  return view
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

describe('deploy/ and charts/nfdctl do not drift: every object both produce', function () {
  let tools: Tools

  before(async function () {
    tools = await chartTools(this)
  })

  const cases: Array<{tree: string; values: Json; options?: Options; labelledNamespace?: boolean}> = [
    // deploy/gc goes into NFD's namespace, which it does not create.
    {tree: 'deploy/gc', values: {'admissionPolicies.enable': false, 'agent.enable': false}},
    {
      // deploy/gc/rbac's leader-election Role serves the Deployment and the CronJob alike there; the chart
      // leaves it out when the CronJob runs alone, as `gc once` takes no Lease. Its cluster rules are compared.
      options: {clusterGrantsOnly: true},
      tree: 'deploy/gc/cronjob',
      values: {'admissionPolicies.enable': false, 'agent.enable': false, 'gc.cronJob.enable': true},
    },
    // deploy/agent and deploy/plugins create their namespace; the chart's is the release namespace, labelled
    // by hand as docs/helm.md says.
    {labelledNamespace: true, tree: 'deploy/agent', values: {'gc.enable': false}},
    // deploy/agent-dra is deploy/agent with the DRA driver: its flags, mounts, role and policies.
    {labelledNamespace: true, tree: 'deploy/agent-dra', values: {'agent.dra.enable': true, 'gc.enable': false}},
    {
      labelledNamespace: true,
      tree: 'deploy/plugins',
      values: {'admissionPolicies.enable': false, 'agent.enable': false, 'gc.enable': false, 'plugins.enable': true},
    },
  ]

  for (const {labelledNamespace, options, tree, values} of cases) {
    it(`${tree} and the chart with ${Object.entries(values)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`, async function () {
      const kustomized = driftView({objects: await kustomize(tools, join(repoRoot, tree)), prefix: kustomizePrefix}, options)
      const namespaceLabels = labelledNamespace ? ((await documentedNamespaceLabels()) ?? {'(docs/helm.md has no `kubectl label namespace` command)': ''}) : undefined
      const rendered = (await renderChart(tools, {namespace: release.namespace, release: release.name, values})).objects
      const charted = driftView({namespaceLabels, objects: rendered, prefix: release.prefix}, options)
      expect(
        Object.keys(kustomized).filter((k) => [...workloadKinds].some((kind) => k.startsWith(`${kind} `))),
        'workloads of the tree',
      ).to.have.length(1)
      const found = differences(kustomized, charted)
      if (found.length > 0) expect.fail(`${tree} and charts/nfdctl differ (change one to match the other):\n  ${found.join('\n  ')}`)
    })
  }

  it('the comparison sees any changed field (a flag, the termination-message path, a pod or workload field, a lost volume, a widened rule, a moved host path, an unbound or changed service account), and puts aside only the image, its pulling and names', async function () {
    const values = {'gc.enable': false}
    const base = (await renderChart(tools, {namespace: release.namespace, release: release.name, values})).objects
    // What differs by design only: another release, namespace, image and pull settings, and a pod label.
    const changed = (
      await renderChart(tools, {
        namespace: 'elsewhere',
        release: 'other',
        values: {
          ...values,
          'agent.hostPaths.stateDir': '/srv/nfdctl',
          'agent.podLabels': {team: 'edge'},
          'image.pullPolicy': 'Always',
          'image.repository': 'registry.example.test/nfdctl',
          imagePullSecrets: [{name: 'regcred'}],
        },
      })
    ).objects
    const daemonSet = changed.find((o) => o.kind === 'DaemonSet') as Json
    const pod = ((daemonSet.spec as Json).template as Json).spec as {containers: Json[]; volumes: Json[]} & Json
    pod.containers[0].args = [...(pod.containers[0].args as string[]).slice(0, -1), '--log-format=text']
    delete pod.containers[0].terminationMessagePath
    pod.containers[0].workingDir = '/tmp'
    pod.dnsPolicy = 'ClusterFirstWithHostNet'
    pod.volumes = pod.volumes.filter((v) => v.name !== 'udev')
    ;(daemonSet.spec as Json).minReadySeconds = 30
    const role = changed.find((o) => o.kind === 'ClusterRole') as Json
    ;(role.rules as Array<{verbs: string[]}>)[0].verbs.push('delete')
    const account = changed.find((o) => o.kind === 'ServiceAccount') as Json
    account.automountServiceAccountToken = false
    const chart = {namespaceLabels: {'pod-security.kubernetes.io/enforce': 'privileged'}, prefix: release.prefix}
    const found = differences(driftView({...chart, objects: base}), driftView({...chart, objects: changed, prefix: 'other-nfdctl-'}))
    const expected = [
      'DaemonSet agent.spec.minReadySeconds: kustomize (absent), chart 30',
      'DaemonSet agent.spec.template.spec.containers[agent].args[6]: kustomize "--log-format=json", chart "--log-format=text"',
      'DaemonSet agent.spec.template.spec.containers[agent].terminationMessagePath: kustomize "/tmp/termination-log", chart (absent)',
      'DaemonSet agent.spec.template.spec.containers[agent].workingDir: kustomize (absent), chart "/tmp"',
      'DaemonSet agent.spec.template.spec.dnsPolicy: kustomize (absent), chart "ClusterFirstWithHostNet"',
      'DaemonSet agent.spec.template.spec.volumes[state].hostPath.path: kustomize "/var/lib/nfdctl", chart "/srv/nfdctl"',
      'DaemonSet agent.spec.template.spec.volumes[udev]: kustomize {"name":"udev","hostPath":{"path":"/run/udev","type":"DirectoryOrCreate"}}, chart (absent)',
      'DaemonSet agent.serviceAccount.grants[1]: kustomize "cluster: get,list,watch deviceclasses (\\"devices.nfdctl.io\\")", chart "cluster: delete,get,list,watch deviceclasses (\\"devices.nfdctl.io\\")"',
      'ServiceAccount agent.automountServiceAccountToken: kustomize (absent), chart false',
    ]
    expect([...found].sort()).to.deep.equal([...expected].sort())

    const unbound = changed.filter((o) => o.kind !== 'ServiceAccount')
    const unboundFound = differences(driftView({...chart, objects: base}), driftView({...chart, objects: unbound, prefix: 'other-nfdctl-'}))
    expect(unboundFound).to.include(
      'DaemonSet agent.serviceAccount.exists: kustomize "a ServiceAccount of the render, in the workload namespace", chart "none: other-nfdctl-agent is not in the render"',
    )
    expect(unboundFound).to.include('ServiceAccount agent: kustomize {"apiVersion":"v1","kind":"ServiceAccount"}, chart (absent)')
  })

  it("the comparison sees the workloads' Namespace: its Pod Security labels against the ones docs/helm.md gives the release namespace", async function () {
    const objects = await kustomize(tools, join(repoRoot, 'deploy/agent'))
    const documented = await documentedNamespaceLabels()
    expect(documented, 'the kubectl label command of docs/helm.md').to.not.equal(undefined)
    const chart = {namespaceLabels: {...documented, 'pod-security.kubernetes.io/enforce': 'baseline'}, objects: [], prefix: release.prefix}
    expect(differences(driftView({objects, prefix: kustomizePrefix}), driftView(chart)).filter((d) => d.startsWith("the workloads' Namespace"))).to.deep.equal([
      `the workloads' Namespace.metadata.labels.pod-security.kubernetes.io/enforce: kustomize "privileged", chart "baseline"`,
    ])
  })
})
