import * as Flags from '@oclif/core/flags'

import {nodeClasses, type NodeClasses} from '../lib/devices/node-classes.js'
import {openCluster} from '../lib/kube/connect.js'
import {ownNodeName} from '../lib/kube/node-name.js'
import {clusterFlags} from './kube-flags.js'

/** Which node and which cluster: the commands that work on this machine's devices (devices list, devices agent, plugins serve). */
export const nodeFlags = {
  ...clusterFlags,
  'node-name': Flags.string({description: "this node's name in the cluster, for nodeSelectors (default: $NODE_NAME, then the hostname)"}),
}

/** nodeFlags as oclif hands them over, with --class-file. */
export interface RawNodeFlags {
  readonly 'class-file'?: readonly string[]
  readonly context?: string
  readonly kubeconfig?: string
  readonly 'node-name'?: string
}

/** True when the user named a cluster (--kubeconfig or --context). */
export function clusterGiven(flags: RawNodeFlags): boolean {
  return flags.kubeconfig !== undefined || flags.context !== undefined
}

export interface NodeClassesRead {
  readonly nodeName: string
  readonly found: NodeClasses
}

/**
 * This node's name and the DeviceClasses that apply to it, read once: from --class-file and, with
 * `useCluster`, the cluster's classes and the Node's labels (the connection is closed again).
 */
export async function readNodeClasses(flags: RawNodeFlags, request: {useCluster: boolean; extraLabels?: Readonly<Record<string, string>>; signal: AbortSignal}): Promise<NodeClassesRead> {
  const nodeName = ownNodeName(flags['node-name'])
  const cluster = request.useCluster ? await openCluster({context: flags.context, kubeconfig: flags.kubeconfig}, {burst: 10, qps: 20}) : undefined
  try {
    const found = await nodeClasses({classFiles: flags['class-file'] ?? [], client: cluster?.client, extraLabels: request.extraLabels, nodeName, signal: request.signal})
    return {found, nodeName}
  } finally {
    cluster?.client.close()
  }
}
