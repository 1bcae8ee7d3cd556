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

export async function createNode(client: KubeClient, name: string): Promise<Created> {
  const node = await client.request<{metadata: Created}>('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {labels: {'kubernetes.io/hostname': name}, name}}})
  return node.metadata
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
export async function seedNodesWithObjects(client: KubeClient, names: readonly string[], namespace = 'nfd', concurrency = 32): Promise<void> {
  await inParallel(names, concurrency, async (node) => {
    await createNode(client, node)
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
