import {deviceClassesPath} from '../devices/cluster-classes.js'
import type {Device} from '../devices/types.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'

/** This node's entry in a DeviceClass's status.nodes. */
export interface NodeClassStatus {
  readonly node: string
  readonly devices: ReadonlyArray<{id: string; devName: string; major: number; minor: number}>
  readonly containers: ReadonlyArray<{namespace: string; pod: string; container: string}>
  readonly observedGeneration?: number
}

export function nodeClassStatus(node: string, devices: readonly Device[], containers: NodeClassStatus['containers'], generation?: number): NodeClassStatus {
  return {
    containers: [...containers].sort((a, b) => `${a.namespace}/${a.pod}/${a.container}`.localeCompare(`${b.namespace}/${b.pod}/${b.container}`)),
    devices: [...devices].sort((a, b) => a.id.localeCompare(b.id)).map((d) => ({devName: d.devName, id: d.id, major: d.major, minor: d.minor})),
    node,
    observedGeneration: generation,
  }
}

/**
 * Writes the node's entry of each class's status with server-side apply, one field manager per node
 * (`nfdctl-agent-<node>`): status.nodes is a list-map keyed by node, so agents on other nodes keep theirs.
 * An entry is written only when it changed since the last write that succeeded.
 */
export class StatusWriter {
  readonly #written = new Map<string, string>()

  constructor(
    private readonly client: KubeClient,
    readonly node: string,
  ) {}

  /** Returns the classes whose entry was written now. */
  async write(entries: ReadonlyMap<string, NodeClassStatus>, signal?: AbortSignal): Promise<string[]> {
    const written: string[] = []
    for (const [name, entry] of entries) {
      const key = JSON.stringify(entry)
      if (this.#written.get(name) === key) continue
      try {
        await this.client.request('PATCH', `${deviceClassesPath}/${encodeURIComponent(name)}/status`, {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name}, status: {nodes: [{...entry, lastUpdateTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z')}]}},
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: `nfdctl-agent-${this.node}`, force: true},
        signal,
        })
      } catch (error) {
        // A class from a --class-file that the cluster does not have: nothing to write to.
        if (!isStatus(error, 'NotFound')) throw error
      }
      this.#written.set(name, key)
      written.push(name)
    }
    return written
  }

  /** Forgets what was written, so that everything is written again (after the API server was away). */
  reset(): void {
    this.#written.clear()
  }
}
