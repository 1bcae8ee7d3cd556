import type {KubeClient} from '../kube/kube-client.js'
import {loadClassFiles} from './class-file.js'
import {fetchDeviceClasses, fetchNodeLabels} from './cluster-classes.js'
import {matchesLabelSelector} from './label-selector.js'
import type {DeviceClass} from './types.js'

export interface NodeClassSet {
  /** Every class, class files first; a cluster class takes the place of a class file's of the same name. */
  readonly all: DeviceClass[]
  /** The classes whose nodeSelector selects the node. */
  readonly applicable: DeviceClass[]
}

/**
 * Which classes apply to a node with these labels, from the class files and the cluster's (valid) classes.
 * The cluster's class wins over a file's of the same name: it is the one edited and followed live.
 */
export function classesForNode(fileClasses: readonly DeviceClass[], clusterClasses: Iterable<DeviceClass>, nodeLabels: Readonly<Record<string, string>>): NodeClassSet {
  const cluster = [...clusterClasses]
  const clusterNames = new Set(cluster.map((c) => c.metadata.name))
  const all = [...fileClasses.filter((c) => !clusterNames.has(c.metadata.name)), ...cluster]
  return {all, applicable: all.filter((c) => matchesLabelSelector(c.spec.nodeSelector, nodeLabels))}
}

export interface NodeClassesRequest {
  readonly classFiles: readonly string[]
  /** Read DeviceClasses and the Node's labels from the cluster too. */
  readonly client?: KubeClient
  readonly nodeName: string
  /** Labels given on the command line; they win over the Node's. */
  readonly extraLabels?: Readonly<Record<string, string>>
  readonly signal?: AbortSignal
}

export interface NodeClasses extends NodeClassSet {
  /** Lines to warn about: invalid cluster classes, a Node missing from the cluster. */
  readonly warnings: string[]
}

/**
 * The DeviceClasses (devices.nfdctl.io) that apply to a node, read once from class files (any problem in
 * them is a ConfigError, exit 2) and the cluster (an invalid class is a warning: the others still apply).
 */
export async function nodeClasses(request: NodeClassesRequest): Promise<NodeClasses> {
  const fileClasses = request.classFiles.length > 0 ? await loadClassFiles(request.classFiles) : []
  if (request.client === undefined) return {...classesForNode(fileClasses, [], {...request.extraLabels}), warnings: []}
  const fromCluster = await fetchDeviceClasses(request.client, request.signal)
  const warnings = [...fromCluster.problems]
  const nodeLabels = await fetchNodeLabels(request.client, request.nodeName, request.signal)
  if (nodeLabels === undefined) warnings.push(`Node ${request.nodeName} is not in the cluster; nodeSelectors see only --node-label labels (set --node-name)`)
  return {...classesForNode(fileClasses, fromCluster.classes, {...nodeLabels, ...request.extraLabels}), warnings}
}
