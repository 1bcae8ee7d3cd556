import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import {collectionPath, type ResourceRef} from '../kube/resource.js'
import {deviceClassApiVersion, deviceClassGroup, deviceClassVersion, type DeviceClass} from './types.js'
import {validateDeviceClass} from './validate-device-class.js'

export const deviceClassesResource: ResourceRef = {group: deviceClassGroup, namespaced: false, plural: 'deviceclasses', version: deviceClassVersion}
export const deviceClassesPath = collectionPath(deviceClassesResource)

/** A DeviceClass object from the API server, checked: the class with its defaults, or why it cannot be used. */
export type ListedClass = {readonly ok: true; readonly deviceClass: DeviceClass} | {readonly ok: false; readonly name: string; readonly generation?: number; readonly message: string}

/** Checks a DeviceClass object from the API server (or the agent's copy of one) with the same rules as class files. */
export function listedClass(item: unknown): ListedClass {
  // Lists omit apiVersion/kind on items.
  const result = validateDeviceClass({apiVersion: deviceClassApiVersion, kind: 'DeviceClass', ...(item as object)})
  if (result.ok) return result
  const metadata = (item as {metadata?: {name?: string; generation?: number}} | null)?.metadata
  return {generation: metadata?.generation, message: result.issues.map((i) => `${i.path}: ${i.message}`).join('; '), name: metadata?.name ?? '<unnamed>', ok: false}
}

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
    const listed = listedClass(item)
    if (listed.ok) classes.push(listed.deviceClass)
    else problems.push(`DeviceClass ${listed.name} is invalid and ignored: ${listed.message}`)
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
