import {followed, type Followed} from '../kube/informer-events.js'
import {Informer, MetadataInformer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import {metadataObjectAccept, type ObjectCodec} from '../kube/metadata-list.js'
import {nodesResource, type ObjectMeta} from '../kube/resource.js'
import type {Logger} from '../observe/logger.js'
import {deviceClassesResource} from './cluster-classes.js'

/** A cluster DeviceClass as the store keeps it: its metadata, and its spec once read. */
export type ClassItem = {metadata: ObjectMeta & {generation?: number}; spec?: unknown}

/**
 * For the class informer: lists are whole objects (the specs), the watch is metadata only: every agent's
 * status writes change the classes, and each of them would otherwise reach every agent with the whole
 * status.nodes of the cluster. A watched change of generation (a spec edit) is then read with one GET.
 */
export const deviceClassCodec: ObjectCodec<ClassItem> = {
  listAccept: 'application/json',
  metaOf: (item) => item.metadata,
  toItem: (raw) => {
    const {metadata, spec} = raw as ClassItem
    if (metadata === undefined) return undefined
    return {metadata: {generation: metadata.generation, name: metadata.name, resourceVersion: metadata.resourceVersion, uid: metadata.uid}, spec}
  },
  watchAccept: metadataObjectAccept,
}

/**
 * The informers a ClassStore follows: the cluster's DeviceClasses (whole on lists, metadata on the watch) and
 * this node's Node object (metadata: its labels).
 */
export function followClusterClasses(client: KubeClient, nodeName: string, logger: Logger): {classes: Followed<ClassItem>; node: Followed<ObjectMeta>} {
  return {
    classes: followed((relay) => new Informer({client, logger, pageSize: 500, resource: deviceClassesResource, ...relay}, deviceClassCodec)),
    node: followed((relay) => new MetadataInformer({client, fieldSelector: `metadata.name=${nodeName}`, logger, pageSize: 0, resource: nodesResource, ...relay})),
  }
}
