import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {DeviceClass} from './types.js'
import {validateDeviceClass} from './validate-device-class.js'

export const deviceClassesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'

export interface ClusterClasses {
  readonly classes: DeviceClass[]
  /** One line per class that is invalid (reported, never fatal: the other classes still apply). */
  readonly problems: string[]
}

/** Every DeviceClass (devices.nfdctl.io) of the cluster, validated with the same rules as class files. */
export async function fetchDeviceClasses(client: KubeClient, signal?: AbortSignal): Promise<ClusterClasses> {
  let list: {items?: unknown[]}
  try {
    list = await client.request<{items?: unknown[]}>('GET', deviceClassesPath, {signal})
  } catch (error) {
    if (isStatus(error, 'NotFound')) {
      return {classes: [], problems: ['the DeviceClass (devices.nfdctl.io) CRD is not installed: kubectl apply -f deploy/crds/deviceclasses.devices.nfdctl.io.yaml']}
    }
    throw error
  }
  const classes: DeviceClass[] = []
  const problems: string[] = []
  for (const item of list.items ?? []) {
    // Lists omit apiVersion/kind on items.
    const result = validateDeviceClass({apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', ...(item as object)})
    if (result.ok) classes.push(result.deviceClass)
    else {
      const name = (item as {metadata?: {name?: string}}).metadata?.name ?? '<unnamed>'
      problems.push(`DeviceClass ${name} is invalid and ignored: ${result.issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
    }
  }
  return {classes, problems}
}

/** The labels of a Node, for nodeSelector evaluation; undefined when the Node does not exist. */
export async function fetchNodeLabels(client: KubeClient, node: string, signal?: AbortSignal): Promise<Record<string, string> | undefined> {
  try {
    const object = await client.request<{metadata: {labels?: Record<string, string>}}>('GET', `/api/v1/nodes/${encodeURIComponent(node)}`, {signal})
    return object.metadata.labels ?? {}
  } catch (error) {
    if (isStatus(error, 'NotFound')) return undefined
    throw new Error(`cannot read Node ${node}: ${errorMessage(error)}`, {cause: error})
  }
}
