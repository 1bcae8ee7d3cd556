import type {KubeClient} from '../kube/kube-client.js'
import {loadClassFiles} from './class-file.js'
import {fetchDeviceClasses, fetchNodeLabels} from './cluster-classes.js'
import {classesForNode} from './device-matcher.js'
import type {DeviceClass} from './types.js'

export interface NodeClassesRequest {
  readonly classFiles: readonly string[]
  /** Read DeviceClasses and the Node's labels from the cluster too. */
  readonly client?: KubeClient
  readonly nodeName: string
  /** Labels given on the command line; they win over the Node's. */
  readonly extraLabels?: Readonly<Record<string, string>>
  readonly signal?: AbortSignal
}

export interface NodeClasses {
  /** Every valid class, from the files and the cluster. */
  readonly all: DeviceClass[]
  /** The classes whose nodeSelector selects this node. */
  readonly applicable: DeviceClass[]
  /** Lines to warn about: invalid cluster classes, a Node missing from the cluster. */
  readonly warnings: string[]
}

/**
 * The DeviceClasses (devices.nfdctl.io) that apply to a node, from class files (any problem in them is a
 * ConfigError, exit 2) and the cluster (an invalid class is a warning: the others still apply).
 */
export async function nodeClasses(request: NodeClassesRequest): Promise<NodeClasses> {
  const all: DeviceClass[] = request.classFiles.length > 0 ? await loadClassFiles(request.classFiles) : []
  const warnings: string[] = []
  let labels: Record<string, string> = {...request.extraLabels}
  if (request.client !== undefined) {
    const fromCluster = await fetchDeviceClasses(request.client, request.signal)
    warnings.push(...fromCluster.problems)
    all.push(...fromCluster.classes)
    const nodeLabels = await fetchNodeLabels(request.client, request.nodeName, request.signal)
    if (nodeLabels === undefined) warnings.push(`Node ${request.nodeName} is not in the cluster; nodeSelectors see only --node-label labels (set --node-name)`)
    labels = {...nodeLabels, ...request.extraLabels}
  }
  return {all, applicable: classesForNode(all, labels), warnings}
}
