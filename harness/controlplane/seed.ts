import pLimit from 'p-limit'

import {nodeNameLabel} from '../../src/lib/gc/kinds.js'
import {isStatus} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {listMetadata} from '../../src/lib/kube/metadata-list.js'
import {waitFor} from '../process/wait.js'

export interface Created {
  readonly name: string
  readonly namespace?: string
  readonly uid: string
}

const nfPath = (ns: string): string => `/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/${ns}/nodefeatures`
const nrtPath = '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies'

export async function ensureNamespace(client: KubeClient, name: string): Promise<void> {
  try {
    await client.request('POST', '/api/v1/namespaces', {body: {apiVersion: 'v1', kind: 'Namespace', metadata: {name}}})
  } catch (error) {
    if (!isStatus(error, 'Conflict')) throw error
  }
}

export async function createNode(client: KubeClient, name: string, labels: Record<string, string> = {'kubernetes.io/hostname': name}): Promise<Created> {
  const node = await client.request<{metadata: Created}>('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {labels, name}}})
  return node.metadata
}

// What nfd-master writes on an x86 server (cpuid flags, the CPU model, kernel, memory, PCI, storage, OS), in
// the order it sorts them; cut to the count asked for, or numbered further.
const cpuidFlags =
  'ADX AESNI AMXBF16 AMXINT8 AMXTILE AVX AVX2 AVX512BF16 AVX512BITALG AVX512BW AVX512CD AVX512DQ AVX512F AVX512FP16 AVX512IFMA AVX512VBMI AVX512VBMI2 AVX512VL AVX512VNNI AVX512VPOPCNTDQ AVXVNNI BMI1 BMI2 CETIBT CETSS CLDEMOTE CLMUL CLWB CMPXCHG8 CX16 ERMS F16C FLUSH_L1D FMA3 FSRM FXSR FXSROPT GFNI HYPERVISOR IA32_ARCH_CAP IBPB IBRS LAHF LZCNT MD_CLEAR MMX MOVBE MOVDIR64B MOVDIRI OSXSAVE POPCNT RDRAND RDSEED RDTSCP SERIALIZE SHA SPEC_CTRL_SSBD SSE SSE2 SSE3 SSE4 SSE42 SSSE3 STIBP SYSCALL SYSEE TSXLDTRK VAES VMX VPCLMULQDQ WAITPKG X87 XGETBV1 XSAVE XSAVEC XSAVEOPT XSAVES'.split(
    ' ',
  )
const nfdFeatureLabels: ReadonlyArray<readonly [string, string]> = [
  ...cpuidFlags.map((flag) => [`feature.node.kubernetes.io/cpu-cpuid.${flag}`, 'true'] as const),
  ['feature.node.kubernetes.io/cpu-cstate.enabled', 'true'],
  ['feature.node.kubernetes.io/cpu-hardware_multithreading', 'true'],
  ['feature.node.kubernetes.io/cpu-model.family', '6'],
  ['feature.node.kubernetes.io/cpu-model.id', '143'],
  ['feature.node.kubernetes.io/cpu-model.vendor_id', 'Intel'],
  ['feature.node.kubernetes.io/cpu-pstate.status', 'active'],
  ['feature.node.kubernetes.io/cpu-pstate.turbo', 'true'],
  ['feature.node.kubernetes.io/cpu-rdt.RDTCMT', 'true'],
  ['feature.node.kubernetes.io/cpu-rdt.RDTL3CA', 'true'],
  ['feature.node.kubernetes.io/cpu-rdt.RDTMBA', 'true'],
  ['feature.node.kubernetes.io/cpu-rdt.RDTMBM', 'true'],
  ['feature.node.kubernetes.io/cpu-rdt.RDTMON', 'true'],
  ['feature.node.kubernetes.io/kernel-config.NO_HZ', 'true'],
  ['feature.node.kubernetes.io/kernel-config.NO_HZ_IDLE', 'true'],
  ['feature.node.kubernetes.io/kernel-version.full', '6.8.0-49-generic'],
  ['feature.node.kubernetes.io/kernel-version.major', '6'],
  ['feature.node.kubernetes.io/kernel-version.minor', '8'],
  ['feature.node.kubernetes.io/kernel-version.revision', '0'],
  ['feature.node.kubernetes.io/memory-numa', 'true'],
  ['feature.node.kubernetes.io/network-sriov.capable', 'true'],
  ['feature.node.kubernetes.io/pci-0200_8086.present', 'true'],
  ['feature.node.kubernetes.io/pci-0300_1a03.present', 'true'],
  ['feature.node.kubernetes.io/storage-nonrotationaldisk', 'true'],
  ['feature.node.kubernetes.io/system-os_release.ID', 'ubuntu'],
  ['feature.node.kubernetes.io/system-os_release.VERSION_ID', '24.04'],
  ['feature.node.kubernetes.io/system-os_release.VERSION_ID.major', '24'],
  ['feature.node.kubernetes.io/system-os_release.VERSION_ID.minor', '04'],
]

/**
 * A Node's labels as a cluster running NFD has them: the kubelet's own, then `features` of nfd-master's
 * feature labels (about 100 on a current x86 server).
 */
export function nfdNodeLabels(name: string, features: number): Record<string, string> {
  const labels: Record<string, string> = {
    'beta.kubernetes.io/arch': 'amd64',
    'beta.kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'kubernetes.io/hostname': name,
    'kubernetes.io/os': 'linux',
    'node.kubernetes.io/instance-type': 'm7i.4xlarge',
    'topology.kubernetes.io/region': 'eu-west-1',
    'topology.kubernetes.io/zone': 'eu-west-1a',
  }
  for (let i = 0; i < features; i++) {
    const [key, value] = nfdFeatureLabels[i] ?? [`feature.node.kubernetes.io/custom-${i}`, 'true']
    labels[key] = value
  }
  return labels
}

/** A NodeFeature like nfd-worker writes; `node: undefined` leaves out the node-name label. */
export async function createNodeFeature(client: KubeClient, namespace: string, name: string, node: string | undefined): Promise<Created> {
  const labels = node === undefined ? {} : {[nodeNameLabel]: node}
  const body = {
    apiVersion: 'nfd.k8s-sigs.io/v1alpha1',
    kind: 'NodeFeature',
    metadata: {labels, name, namespace},
    spec: {features: {attributes: {'cpu.model': {elements: {vendor_id: 'GenuineIntel'}}}}, labels: {'feature.node.kubernetes.io/seeded': 'true'}},
  }
  return (await client.request<{metadata: Created}>('POST', nfPath(namespace), {body})).metadata
}

export async function createTopology(client: KubeClient, node: string): Promise<Created> {
  const body = {apiVersion: 'topology.node.k8s.io/v1alpha2', kind: 'NodeResourceTopology', metadata: {name: node}, topologyPolicies: ['None'], zones: []}
  return (await client.request<{metadata: Created}>('POST', nrtPath, {body})).metadata
}

export async function exists(client: KubeClient, path: string): Promise<boolean> {
  try {
    await client.request('GET', path)
    return true
  } catch (error) {
    if (isStatus(error, 'NotFound')) return false
    throw error
  }
}

export const nodeFeaturePath = (ns: string, name: string): string => `${nfPath(ns)}/${name}`
export const topologyPath = (name: string): string => `${nrtPath}/${name}`

/** Removes every Node, NodeFeature and NodeResourceTopology so each test starts from a known cluster. */
export async function resetCluster(client: KubeClient): Promise<void> {
  await client.request('DELETE', '/api/v1/nodes')
  try {
    await client.request('DELETE', nrtPath)
  } catch (error) {
    if (!isStatus(error, 'NotFound')) throw error
  }
  const features = await listMetadata(client, {group: 'nfd.k8s-sigs.io', namespaced: true, plural: 'nodefeatures', version: 'v1alpha1'}, {pageSize: 0})
  for (const ns of new Set(features.items.map((f) => f.namespace!))) await client.request('DELETE', nfPath(ns))
}

/** Runs `fn` over `items`, `concurrency` at a time (seeding thousands of objects quickly). */
export async function inParallel<T, R>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const limit = pLimit(concurrency)
  return Promise.all(items.map((item) => limit(() => fn(item))))
}

/** Nodes, each with the NodeFeature (in `namespace`) and the NodeResourceTopology nfd would write for it. */
/** Nodes with their NodeFeature and NodeResourceTopology; `featureLabels` of NFD's labels on each Node (none: the hostname only). */
export async function seedNodesWithObjects(client: KubeClient, names: readonly string[], namespace = 'nfd', concurrency = 32, featureLabels = 0): Promise<void> {
  await inParallel(names, concurrency, async (node) => {
    await createNode(client, node, featureLabels > 0 ? nfdNodeLabels(node, featureLabels) : undefined)
    await createNodeFeature(client, namespace, node, node)
    await createTopology(client, node)
  })
}

/** Stale objects: for each name, the NodeFeature and NodeResourceTopology of a Node that does not exist. */
export async function seedObjectsWithoutNodes(client: KubeClient, names: readonly string[], namespace = 'nfd', concurrency = 64): Promise<void> {
  await inParallel(names, concurrency, async (node) => {
    await createNodeFeature(client, namespace, node, node)
    await createTopology(client, node)
  })
}

/** Waits until none of these object paths exists any more. */
export async function waitUntilGone(client: KubeClient, paths: readonly string[], withinMs: number, what: string): Promise<void> {
  await waitFor(what, async () => (await Promise.all(paths.map((p) => exists(client, p)))).every((e) => !e), {intervalMs: 20, timeoutMs: withinMs})
}
