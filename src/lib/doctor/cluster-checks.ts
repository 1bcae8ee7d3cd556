/**
 * The judgements of `nfdctl doctor` over what cluster-facts.ts read: per feature, whether it works here and
 * what to change. A feature the cluster's classes use and that does not work is a failure; one nobody uses
 * yet is a warning. Pure.
 */
import {deviceClassCrdPath} from '../devices/device-class-crd.js'
import {droppedFeatureGates} from '../devices/dropped-features.js'
import {matchesLabelSelector} from '../devices/label-selector.js'
import {draClassName, resourceNameOf} from '../devices/resource-names.js'
import type {ClassFacts, ClusterFacts, NodeFacts, Probe} from './cluster-facts.js'
import type {Finding, FindingStatus} from './findings.js'

/** resource.k8s.io/v1, which nfdctl's DRA driver speaks, is served and spoken from this minor on. */
export const draMinimumMinor = 34

/** The minor version of a Kubernetes gitVersion such as v1.37.2 or v1.34.4-eks-1234; undefined when unreadable. */
export function minorOf(version: string): number | undefined {
  const match = /^v?1\.(\d+)\./.exec(version)
  return match ? Number(match[1]) : undefined
}

/** containerd 1.x ships CDI off (enable_cdi); 2.x on. */
function containerdWithoutCdiDefault(runtime: string): boolean {
  return /^containerd:\/\/v?1\./.test(runtime)
}

export function judgeCluster(facts: ClusterFacts): Finding[] {
  const used = usedFeatures(facts.classes)
  return [
    ...serverFindings(facts, used.dra),
    ...nodeFindings(facts.nodes, used.dra),
    ...draFindings(facts, used.dra),
    ...crdFindings(facts, used.any),
    ...agentFindings(facts),
    ...agentPodFindings(facts),
    ...facts.refusedReads.map(
      (r): Finding => ({
        check: `read ${r.what}`,
        feature: 'agent',
        fix: `grant get and list on ${r.what} to the user doctor runs as (a read-only ClusterRole)`,
        found: `cannot read ${r.what}, so what depends on them is not checked: ${r.message}`,
        // What doctor cannot read it cannot call working: a run that reads nothing must not pass.
        status: 'fail',
      }),
    ),
  ]
}

/** Whether the cluster's classes use any device feature, and DRA. */
export function usedFeatures(classes: readonly ClassFacts[]): {any: boolean; dra: boolean} {
  const dra = classes.some((c) => c.deviceClass.spec.allocation === 'DRA')
  return {any: classes.length > 0, dra}
}

const needed = (isUsed: boolean): FindingStatus => (isUsed ? 'fail' : 'warn')

function serverFindings(facts: ClusterFacts, draUsed: boolean): Finding[] {
  const binaryMinor = minorOf(facts.serverVersion)
  // An API server emulating an older minor behaves as that minor (its APIs and gates), whatever its binary.
  const emulating = facts.emulatedMinor !== undefined && facts.emulatedMinor !== binaryMinor ? ` (emulating 1.${facts.emulatedMinor})` : ''
  const minor = facts.emulatedMinor ?? binaryMinor
  const server = `${facts.serverVersion}${emulating}`
  const findings: Finding[] = [{check: 'API server version', feature: 'gc', found: `API server ${server}`, status: 'ok'}]
  if (minor === undefined || minor < draMinimumMinor) {
    findings.push({
      check: 'API server version',
      feature: 'DRA',
      fix: `upgrade the control plane to 1.${draMinimumMinor} or later, or use allocation Class or Device`,
      found: `API server ${server}: DRA through resource.k8s.io/v1 needs 1.${draMinimumMinor} or later`,
      status: needed(draUsed),
    })
  }
  return findings
}

function nodeFindings(nodes: readonly NodeFacts[] | undefined, draUsed: boolean): Finding[] {
  if (nodes === undefined) return []
  if (nodes.length === 0) return [{check: 'nodes', feature: 'agent', fix: 'join nodes to the cluster', found: 'the cluster has no Node', status: 'warn'}]
  const findings: Finding[] = []
  const old = nodes.filter((n) => (minorOf(n.kubeletVersion) ?? 0) < draMinimumMinor)
  if (old.length > 0) {
    findings.push({
      check: 'kubelet version',
      feature: 'DRA',
      fix: `upgrade the kubelet of ${list(old.map((n) => n.name))} to 1.${draMinimumMinor} or later`,
      found: `${list(old.map((n) => `${n.name} ${n.kubeletVersion || 'unknown'}`))}: DRA needs kubelet 1.${draMinimumMinor} or later`,
      status: needed(draUsed),
    })
  } else {
    findings.push({check: 'kubelet version', feature: 'DRA', found: `kubelets ${list(distinct(nodes.map((n) => n.kubeletVersion)))}`, status: 'ok'})
  }
  const noCdi = nodes.filter((n) => containerdWithoutCdiDefault(n.containerRuntimeVersion))
  if (noCdi.length > 0) {
    findings.push({
      check: 'container runtime',
      feature: 'DRA',
      fix: "set enable_cdi = true in containerd's CRI config (containerd 1.7), or upgrade to containerd 2",
      found: `${list(noCdi.map((n) => `${n.name} ${n.containerRuntimeVersion}`))}: containerd 1.x ships CDI off, and DRA hands devices over by CDI`,
      status: 'warn',
    })
  } else {
    findings.push({check: 'container runtime', feature: 'agent', found: `runtimes ${list(distinct(nodes.map((n) => n.containerRuntimeVersion || 'unknown')))}`, status: 'ok'})
  }
  return findings
}

function draFindings(facts: ClusterFacts, draUsed: boolean): Finding[] {
  if (!facts.resourceV1) {
    return [
      {
        check: 'resource.k8s.io/v1 served',
        feature: 'DRA',
        fix: `serve resource.k8s.io/v1 (Kubernetes 1.${draMinimumMinor} or later; --runtime-config=resource.k8s.io/v1=true), or use allocation Class or Device`,
        found: 'the API server does not serve resource.k8s.io/v1',
        status: needed(draUsed),
      },
    ]
  }
  return [
    {check: 'resource.k8s.io/v1 served', feature: 'DRA', found: 'resource.k8s.io/v1 served', status: 'ok'},
    probeFinding(facts.extendedResourceName, {
      check: 'DeviceClass extendedResourceName kept (dry run)',
      dropped: "the API server drops a DeviceClass's extendedResourceName: pods asking a DRA class by limit (devices.nfdctl.io/<class>) stay Pending",
      feature: 'DRA by limit',
      fix: `turn on the ${droppedFeatureGates.extendedResourceName.gate} feature gate (beta and on from 1.36) in ${droppedFeatureGates.extendedResourceName.components}, or ask DRA classes by ResourceClaim`,
      kept: "the API server keeps a DeviceClass's extendedResourceName: DRA classes can be asked by limit",
      // A DRA class is offered by limit too (the README's way to ask for it): a cluster that drops the field breaks that promise.
      status: needed(draUsed),
    }),
    probeFinding(facts.deviceTaints, {
      check: 'ResourceSlice device taints kept (dry run)',
      dropped: 'the API server drops device taints: an unplugged device leaves the ResourceSlice instead of being tainted',
      feature: 'device taints',
      fix: `turn on the ${droppedFeatureGates.taints.gate} feature gate (beta and on from 1.36) in ${droppedFeatureGates.taints.components}`,
      kept: 'the API server keeps device taints: unplugged devices are tainted devices.nfdctl.io/unplugged',
      // nfdctl leaves an unplugged device out of the slice when taints are dropped: degraded, still correct.
      status: 'warn',
    }),
    facts.admissionPolicies
      ? {check: 'ValidatingAdmissionPolicy served', feature: 'admission policies', found: 'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy served', status: 'ok'}
      : {
          check: 'ValidatingAdmissionPolicy served',
          feature: 'admission policies',
          fix: "upgrade the control plane to 1.30 or later: nfdctl's policies keep one node's agent from writing another node's objects",
          found: 'the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy',
          status: needed(draUsed),
        },
  ]
}

function probeFinding(probe: Probe | undefined, text: {check: string; feature: Finding['feature']; kept: string; dropped: string; fix: string; status: FindingStatus}): Finding {
  if (probe === 'kept') return {check: text.check, feature: text.feature, found: text.kept, status: 'ok'}
  if (probe === 'dropped') return {check: text.check, feature: text.feature, fix: text.fix, found: text.dropped, status: text.status}
  return {
    check: text.check,
    feature: text.feature,
    fix: 'run doctor with credentials that may create (dry run) resource.k8s.io DeviceClasses and ResourceSlices',
    found: `the dry run was refused, so this is unknown: ${probe?.refused ?? 'not probed'}`,
    status: 'warn',
  }
}

function crdFindings(facts: ClusterFacts, classesUsed: boolean): Finding[] {
  const apply = `kubectl apply -f ${deviceClassCrdPath}`
  const findings: Finding[] = []
  if (facts.crd === undefined) {
    // Unreadable: the refused read says so.
  } else if (facts.crd.state === 'missing') {
    findings.push({
      check: 'DeviceClass CRD',
      feature: 'agent',
      fix: `${apply} (only if you use nfdctl's devices: gc needs no CRD of its own)`,
      found: 'the DeviceClass (devices.nfdctl.io) CRD is not installed: device plugins, DRA and the agent are not installed',
      status: 'warn',
    })
  } else if (facts.crd.state === 'outdated') {
    findings.push({
      check: 'DeviceClass CRD',
      feature: 'agent',
      fix: apply,
      found: `the DeviceClass CRD differs from the one this nfdctl ships (served versions: ${list(facts.crd.served)})`,
      status: needed(classesUsed),
    })
  } else {
    findings.push({check: 'DeviceClass CRD', feature: 'agent', found: 'the DeviceClass CRD is installed and current', status: 'ok'})
  }
  for (const line of facts.invalidClasses) {
    findings.push({check: 'DeviceClass valid', feature: 'agent', fix: 'fix the class (nfdctl devices list --class-file shows the problem)', found: `${line}; agents ignore it`, status: 'fail'})
  }
  return findings
}

function agentFindings(facts: ClusterFacts): Finding[] {
  return facts.classes.flatMap((c) => [classAgents(c, facts.nodes), ...draClassPublished(c, facts.draDeviceClasses), ...limitRoutedToPlugins(c, facts)])
}

/**
 * Pods asking a DRA class by limit are served by DRA only where the scheduler sends the limit there. It sends it
 * to a device plugin instead while the node's allocatable lists the resource: 1.34 whenever it lists it at all
 * (even at 0; noderesources/fit.go fitsRequest), 1.35 on while it is above 0 (shouldDelegateResourceToDRA).
 * kubelet lists a stopped plugin's resource at allocatable 0 at once, and from 5 minutes on (its grace for the
 * plugin to come back) at capacity 0 for good (nodestatus/setters.go), so a node that served the class by
 * device plugin before a switch to DRA keeps 1.34 from serving it by limit until the entry is removed.
 * Judged by the API server's version: the scheduler's is not visible, and runs with the control plane.
 */
function limitRoutedToPlugins(c: ClassFacts, facts: ClusterFacts): Finding[] {
  if (c.deviceClass.spec.allocation !== 'DRA' || facts.extendedResourceName !== 'kept' || facts.nodes === undefined) return []
  const resource = resourceNameOf(c.deviceClass.metadata.name)
  const minor = facts.emulatedMinor ?? minorOf(facts.serverVersion)
  const selected = facts.nodes.filter((n) => matchesLabelSelector(c.deviceClass.spec.nodeSelector, n.labels) && n.deviceAllocatable[resource] !== undefined)
  const stale = selected.filter((n) => minor === 34 && n.deviceAllocatable[resource] === '0')
  const served = selected.filter((n) => n.deviceAllocatable[resource] !== '0')
  const check = `pods asking by limit reach DRA (${resource})`
  const findings: Finding[] = []
  if (stale.length > 0) {
    const path = resource.replace('/', '~1')
    findings.push({
      check,
      feature: 'DRA by limit',
      fix:
        `upgrade the control plane to 1.35, or remove the entry on each node once kubelet has let the plugin go (5 minutes after it stopped; `
        + `earlier, kubelet lists it again): kubectl patch node ${stale[0].name} --subresource=status --type=json `
        + `-p '[{"op":"remove","path":"/status/capacity/${path}"},{"op":"remove","path":"/status/allocatable/${path}"}]'`,
      found:
        `${list(stale.map((n) => n.name))} list ${resource} at 0 allocatable, left from a device plugin that served the class; `
        + 'kube-scheduler 1.34 then sends pods asking by limit to device plugins, not DRA, and they stay Pending (Insufficient)',
      status: 'fail',
    })
  }
  if (served.length > 0) {
    findings.push({
      check,
      feature: 'DRA by limit',
      fix: `stop serving class ${c.deviceClass.metadata.name} by device plugin on ${list(served.map((n) => n.name))} (plugins serve, or an agent of an older class spec)`,
      found: `${list(served.map((n) => `${n.name} (${n.deviceAllocatable[resource]})`))} advertise ${resource} by device plugin, so pods asking by limit get the plugin's devices, not DRA's`,
      status: 'fail',
    })
  }
  return findings
}

/** The agents' pods: one not Ready on a node a class selects means that node's devices are not served. */
function agentPodFindings(facts: ClusterFacts): Finding[] {
  if (facts.agentPods === undefined || facts.classes.length === 0) return []
  const check = 'agent pods ready'
  if (facts.agentPods.length === 0) {
    return [{check, feature: 'agent', fix: 'deploy the agent (kubectl apply -k deploy/agent, or the chart)', found: "no pod labelled as nfdctl's agent or plugins runs", status: 'warn'}]
  }
  const selected = new Set((facts.nodes ?? []).filter((n) => facts.classes.some((c) => matchesLabelSelector(c.deviceClass.spec.nodeSelector, n.labels))).map((n) => n.name))
  const notReady = facts.agentPods.filter((p) => !p.ready)
  if (notReady.length === 0) return [{check, feature: 'agent', found: `${facts.agentPods.length} agent pods ready`, status: 'ok'}]
  const names = notReady.map((p) => `${p.namespace}/${p.name}${p.node ? ` on ${p.node}` : ''}`)
  return [
    {
      check,
      feature: 'agent',
      fix: `kubectl -n ${notReady[0].namespace} describe pod ${notReady[0].name}, and its logs: its /readyz says which source is down`,
      found: `${notReady.length} of ${facts.agentPods.length} agent pods not Ready: ${list(names)}`,
      status: notReady.some((p) => p.node !== undefined && selected.has(p.node)) ? 'fail' : 'warn',
    },
  ]
}

/** The agents with --dra publish each DRA class as the resource.k8s.io DeviceClass claims name. */
function draClassPublished(c: ClassFacts, published: readonly string[] | undefined): Finding[] {
  if (c.deviceClass.spec.allocation !== 'DRA' || published === undefined) return []
  const name = draClassName(c.deviceClass.metadata.name)
  const check = `resource.k8s.io DeviceClass ${name}`
  if (published.includes(name)) return [{check, feature: 'DRA', found: `${name} is published: claims can ask for it`, status: 'ok'}]
  return [
    {
      check,
      feature: 'DRA',
      fix: 'run the agent as DRA driver (devices agent --dra: kubectl apply -k deploy/agent-dra)',
      found: `no resource.k8s.io DeviceClass ${name}: no agent runs as DRA driver, so claims for the class stay pending`,
      status: 'fail',
    },
  ]
}

const featureOf = (c: ClassFacts): Finding['feature'] => (c.deviceClass.spec.allocation === 'DRA' ? 'DRA' : 'device plugins')

/** Which of the class's selected nodes have an agent reporting it at the class's generation. */
function classAgents(c: ClassFacts, nodes: readonly NodeFacts[] | undefined): Finding {
  const {name, generation} = c.deviceClass.metadata
  const check = `agents report class ${name} (${c.deviceClass.spec.allocation === 'DRA' ? draClassName(name) : c.deviceClass.spec.allocation})`
  if (nodes === undefined) {
    return {
      check,
      feature: 'agent',
      fix: 'grant list on nodes to see which selected nodes do not report',
      found: `${c.reports.length} nodes report class ${name}; which nodes it selects is unknown`,
      status: 'warn',
    }
  }
  const selected = nodes.filter((n) => matchesLabelSelector(c.deviceClass.spec.nodeSelector, n.labels)).map((n) => n.name)
  const reported = new Map(c.reports.map((r) => [r.node, r]))
  const silent = selected.filter((n) => !reported.has(n))
  const behind = selected.filter((n) => generation !== undefined && (reported.get(n)?.observedGeneration ?? generation) < generation)
  if (selected.length === 0) {
    return {check, feature: featureOf(c), fix: "label nodes to match the class's nodeSelector, or widen it", found: `class ${name} selects no node`, status: 'warn'}
  }
  if (silent.length > 0) {
    return {
      check,
      feature: 'agent',
      fix: `deploy the agent DaemonSet (deploy/) to ${list(silent)} and check its pods (kubectl -n nfdctl-system get pods -o wide)`,
      found: `${silent.length} of ${selected.length} selected nodes report class ${name} nowhere: ${list(silent)}`,
      status: 'fail',
    }
  }
  if (behind.length > 0) {
    return {
      check,
      feature: 'agent',
      fix: `check the agents on ${list(behind)}: they have not applied the class's generation ${generation}`,
      found: `${list(behind)} report an older generation of class ${name}`,
      status: 'warn',
    }
  }
  const latest = c.reports
    .map((r) => r.lastUpdateTime ?? '')
    .sort()
    .at(-1)
  return {check, feature: featureOf(c), found: `all ${selected.length} selected nodes report class ${name}${latest ? ` (latest ${latest})` : ''}`, status: 'ok'}
}

function distinct(values: readonly string[]): string[] {
  return [...new Set(values)].sort()
}

/** At most five names, then a count: a 500-node finding stays one line. */
function list(values: readonly string[]): string {
  return values.length <= 5 ? values.join(', ') : `${values.slice(0, 5).join(', ')} and ${values.length - 5} more`
}
