/**
 * Reads what `nfdctl doctor` judges from the API server: versions, what it serves, what it keeps of a
 * DRA write (server-side dry runs: the only way to see feature gates from outside), the DeviceClass CRD and
 * the classes with their agents' reports. Reads only, and dry runs that persist nothing.
 */
import {createHash} from 'node:crypto'

import {deviceClassesPath, listedClass} from '../devices/cluster-classes.js'
import {deviceClassCrd} from '../devices/device-class-crd.js'
import {resourceDomain, resourceNameOf} from '../devices/resource-names.js'
import type {DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'

/** What a dry-run create kept of the field it probes; refused: the server (or our permissions) said no, with why. */
export type Probe = 'dropped' | 'kept' | {readonly refused: string}

export interface NodeFacts {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly kubeletVersion: string
  readonly containerRuntimeVersion: string
  /** The node's allocatable of nfdctl's resources (devices.nfdctl.io/<class>), as kubelet lists them: what the scheduler reads. */
  readonly deviceAllocatable: Readonly<Record<string, string>>
}

export interface AgentReport {
  readonly node: string
  readonly observedGeneration?: number
  readonly lastUpdateTime?: string
}

/** A pod of the agent (or of plugins serve), as the shipped manifests and the chart label it. */
export interface AgentPod {
  readonly namespace: string
  readonly name: string
  readonly node?: string
  readonly ready: boolean
}

export interface ClassFacts {
  readonly deviceClass: DeviceClass
  readonly reports: readonly AgentReport[]
}

export type CrdFacts = {readonly state: 'current'} | {readonly state: 'missing'} | {readonly state: 'outdated'; readonly served: readonly string[]}

export interface ClusterFacts {
  readonly serverVersion: string
  /** The minor version the API server emulates (--emulated-version), when it says one (1.31 and later). */
  readonly emulatedMinor?: number
  /** Absent when the Nodes could not be listed (see refusedReads). */
  readonly nodes?: readonly NodeFacts[]
  readonly resourceV1: boolean
  /** Absent when resource.k8s.io/v1 is not served (nothing to probe). */
  readonly extendedResourceName?: Probe
  readonly deviceTaints?: Probe
  readonly admissionPolicies: boolean
  /** The names of the resource.k8s.io DeviceClasses; absent when resource.k8s.io/v1 is not served or they could not be read. */
  readonly draDeviceClasses?: readonly string[]
  /** Absent when the CRD could not be read (see refusedReads). */
  readonly crd?: CrdFacts
  readonly classes: readonly ClassFacts[]
  /** One line per class the API server holds that fails nfdctl's validation. */
  readonly invalidClasses: readonly string[]
  /** The agents' pods; absent when pods could not be listed. */
  readonly agentPods?: readonly AgentPod[]
  /** Reads the server refused (403): doctor says what it could not see instead of stopping. */
  readonly refusedReads: readonly RefusedRead[]
}

export interface RefusedRead {
  /** What could not be read, as RBAC names it, e.g. "nodes". */
  readonly what: string
  readonly message: string
}

const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/deviceclasses.${resourceDomain}`
const probeName = 'nfdctl-doctor-probe-'

export async function readClusterFacts(client: KubeClient, signal?: AbortSignal): Promise<ClusterFacts> {
  const refusedReads: RefusedRead[] = []
  const unlessForbidden = async <T>(what: string, read: Promise<T>): Promise<T | undefined> => {
    try {
      return await read
    } catch (error) {
      if (!isStatus(error, 'Forbidden')) throw error
      refusedReads.push({message: errorMessage(error), what})
      return undefined
    }
  }
  const [version, nodes, resourceV1, admissionPolicies, crd, agentPods] = await Promise.all([
    client.request<{gitVersion?: string; emulationMajor?: string; emulationMinor?: string}>('GET', '/version', {signal}),
    unlessForbidden('nodes', readNodes(client, signal)),
    serves(client, '/apis/resource.k8s.io/v1', 'resourceslices', signal),
    serves(client, '/apis/admissionregistration.k8s.io/v1', 'validatingadmissionpolicies', signal),
    unlessForbidden('customresourcedefinitions', readCrd(client, signal)),
    unlessForbidden('pods', readAgentPods(client, signal)),
  ])
  const [extendedResourceName, deviceTaints, draDeviceClasses] = resourceV1
    ? await Promise.all([
        probeExtendedResourceName(client, signal),
        probeDeviceTaints(client, signal),
        unlessForbidden('deviceclasses.resource.k8s.io', readNames(client, '/apis/resource.k8s.io/v1/deviceclasses', signal)),
      ])
    : []
  const {classes, invalidClasses} = (crd?.state !== 'missing' && (await unlessForbidden(`deviceclasses.${resourceDomain}`, readClasses(client, signal)))) || {classes: [], invalidClasses: []}
  const emulatedMinor = version.emulationMajor === '1' && version.emulationMinor ? Number.parseInt(version.emulationMinor, 10) : undefined
  return {
    admissionPolicies,
    agentPods,
    classes,
    crd,
    deviceTaints,
    draDeviceClasses,
    emulatedMinor,
    extendedResourceName,
    invalidClasses,
    nodes,
    refusedReads,
    resourceV1,
    serverVersion: version.gitVersion ?? 'unknown',
  }
}

/** deploy/ labels the DaemonSets' pods by name, the chart by name nfdctl and component. */
const agentPodSelectors = ['app.kubernetes.io/name in (nfdctl-agent,nfdctl-plugins)', 'app.kubernetes.io/name=nfdctl,app.kubernetes.io/component in (agent,plugins)']

async function readAgentPods(client: KubeClient, signal?: AbortSignal): Promise<AgentPod[]> {
  type Pod = {metadata: {name: string; namespace: string}; spec?: {nodeName?: string}; status?: {conditions?: Array<{type: string; status: string}>}}
  const lists = await Promise.all(agentPodSelectors.map((labelSelector) => client.request<{items?: Pod[]}>('GET', '/api/v1/pods', {query: {labelSelector}, signal})))
  return lists.flatMap((l) =>
    (l.items ?? []).map((p) => ({
      name: p.metadata.name,
      namespace: p.metadata.namespace,
      node: p.spec?.nodeName,
      ready: (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    })),
  )
}

async function readNodes(client: KubeClient, signal?: AbortSignal): Promise<NodeFacts[]> {
  type Node = {
    metadata: {name: string; labels?: Record<string, string>}
    status?: {allocatable?: Record<string, string>; nodeInfo?: {kubeletVersion?: string; containerRuntimeVersion?: string}}
  }
  const list = await client.request<{items?: Node[]}>('GET', '/api/v1/nodes', {signal})
  return (list.items ?? []).map((n) => ({
    containerRuntimeVersion: n.status?.nodeInfo?.containerRuntimeVersion ?? '',
    deviceAllocatable: Object.fromEntries(Object.entries(n.status?.allocatable ?? {}).filter(([resource]) => resource.startsWith(`${resourceDomain}/`))),
    kubeletVersion: n.status?.nodeInfo?.kubeletVersion ?? '',
    labels: n.metadata.labels ?? {},
    name: n.metadata.name,
  }))
}

async function readNames(client: KubeClient, path: string, signal?: AbortSignal): Promise<string[]> {
  const list = await client.request<{items?: Array<{metadata: {name: string}}>}>('GET', path, {signal})
  return (list.items ?? []).map((i) => i.metadata.name)
}

/** Whether discovery lists the resource in the group version (404: the group version is not served). */
async function serves(client: KubeClient, groupVersionPath: string, resource: string, signal?: AbortSignal): Promise<boolean> {
  try {
    const list = await client.request<{resources?: Array<{name: string}>}>('GET', groupVersionPath, {signal})
    return (list.resources ?? []).some((r) => r.name === resource)
  } catch (error) {
    if (isStatus(error, 'NotFound')) return false
    throw error
  }
}

/** A server-side dry-run create: what the server would store, or why it refused. */
async function dryRunCreate<T>(client: KubeClient, path: string, body: unknown, signal?: AbortSignal): Promise<T | {refused: string}> {
  try {
    return await client.request<T>('POST', path, {body, query: {dryRun: 'All'}, signal})
  } catch (error) {
    if (isStatus(error, 'Forbidden') || isStatus(error, 'Invalid') || isStatus(error, 'BadRequest')) return {refused: errorMessage(error)}
    throw error
  }
}

const isRefused = (value: unknown): value is {refused: string} => typeof value === 'object' && value !== null && 'refused' in value

/** The API server drops spec.extendedResourceName of a resource.k8s.io DeviceClass unless DRAExtendedResource is on. */
async function probeExtendedResourceName(client: KubeClient, signal?: AbortSignal): Promise<Probe> {
  const body = {apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: {generateName: probeName}, spec: {extendedResourceName: resourceNameOf('nfdctl-doctor-probe')}}
  const created = await dryRunCreate<{spec?: {extendedResourceName?: string}}>(client, '/apis/resource.k8s.io/v1/deviceclasses', body, signal)
  if (isRefused(created)) return created
  return created.spec?.extendedResourceName ? 'kept' : 'dropped'
}

/** The API server drops the taints of a ResourceSlice's devices unless DRADeviceTaints is on. */
async function probeDeviceTaints(client: KubeClient, signal?: AbortSignal): Promise<Probe> {
  const body = {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: {generateName: probeName},
    spec: {
      allNodes: true,
      devices: [{name: 'probe', taints: [{effect: 'NoSchedule', key: `${resourceDomain}/doctor-probe`}]}],
      driver: resourceDomain,
      pool: {generation: 0, name: 'nfdctl-doctor-probe', resourceSliceCount: 1},
    },
  }
  const created = await dryRunCreate<{spec?: {devices?: Array<{taints?: unknown[]}>}}>(client, '/apis/resource.k8s.io/v1/resourceslices', body, signal)
  if (isRefused(created)) return created
  return (created.spec?.devices?.[0]?.taints?.length ?? 0) > 0 ? 'kept' : 'dropped'
}

/** The parts of a CRD's versions that decide what the server accepts, as one digest. */
export function crdVersionsDigest(crd: unknown): string {
  const versions = ((crd as {spec?: {versions?: unknown[]}}).spec?.versions ?? []) as Array<{name?: string; served?: boolean; schema?: unknown}>
  const canonical = versions.map((v) => ({name: v.name, schema: v.schema, served: v.served})).sort((a, b) => String(a.name).localeCompare(String(b.name)))
  return createHash('sha256').update(stableJson(canonical)).digest('hex')
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined)
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`)
      .join(',')}}`
  }
  return JSON.stringify(value)
}

async function readCrd(client: KubeClient, signal?: AbortSignal): Promise<CrdFacts> {
  let served: {metadata?: {deletionTimestamp?: string}; spec?: {versions?: Array<{name: string}>}}
  try {
    served = await client.request('GET', crdPath, {signal})
  } catch (error) {
    if (isStatus(error, 'NotFound')) return {state: 'missing'}
    throw error
  }
  // A CRD being deleted serves nothing any more, though it is still read back until its objects are gone.
  if (served.metadata?.deletionTimestamp) return {state: 'missing'}
  if (crdVersionsDigest(served) === crdVersionsDigest(deviceClassCrd())) return {state: 'current'}
  return {served: (served.spec?.versions ?? []).map((v) => v.name), state: 'outdated'}
}

async function readClasses(client: KubeClient, signal?: AbortSignal): Promise<{classes: ClassFacts[]; invalidClasses: string[]}> {
  let list: {items?: Array<{status?: {nodes?: AgentReport[]}}>}
  try {
    list = await client.request('GET', deviceClassesPath, {signal})
  } catch (error) {
    // Deleted between the CRD's read and this one.
    if (isStatus(error, 'NotFound')) return {classes: [], invalidClasses: []}
    throw error
  }
  const classes: ClassFacts[] = []
  const invalidClasses: string[] = []
  for (const item of list.items ?? []) {
    const listed = listedClass(item)
    if (!listed.ok) {
      invalidClasses.push(`DeviceClass ${listed.name}: ${listed.message}`)
      continue
    }
    const reports = (item.status?.nodes ?? []).map((r) => ({lastUpdateTime: r.lastUpdateTime, node: r.node, observedGeneration: r.observedGeneration}))
    classes.push({deviceClass: listed.deviceClass, reports})
  }
  return {classes, invalidClasses}
}
