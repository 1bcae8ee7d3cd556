import {criLabels} from '../../src/lib/agent/container-access.js'
import type {RuntimeContainer} from '../../src/lib/runtime/containerd-client.js'

/**
 * What the agent reads of containerd through its follower, without containerd: the containers and running
 * tasks are set by the test, and every list is counted (with the filters it was asked with).
 */
export class FakeContainerd {
  connected = true
  readonly running = new Map<string, number>()
  containersListed: RuntimeContainer[] = []
  readonly lists: Array<readonly string[]> = []
  /** A list fails with this while set. */
  failure: Error | undefined
  readonly #touched = new Map<string, number>()
  started = 0
  stopped = 0

  /** A running workload container of a pod, with the CRI labels kubelet gives it. */
  run(id: string, pod: {namespace: string; name: string; uid: string}, container: string, pid = 1000): RuntimeContainer {
    const labels = {[criLabels.container]: container, [criLabels.kind]: 'container', [criLabels.namespace]: pod.namespace, [criLabels.pod]: pod.name, [criLabels.podUid]: pod.uid}
    const c: RuntimeContainer = {id, labels}
    this.containersListed.push(c)
    this.running.set(id, pid)
    return c
  }

  async containers(filters: readonly string[]): Promise<RuntimeContainer[]> {
    this.lists.push(filters)
    if (this.failure !== undefined) throw this.failure
    return [...this.containersListed]
  }

  /** containerd said something of the container. */
  touch(id: string): void {
    this.#touched.set(id, (this.#touched.get(id) ?? 0) + 1)
  }

  touchedAt(id: string): number {
    return this.#touched.get(id) ?? 0
  }

  start(): void {
    this.started++
  }

  async stop(): Promise<void> {
    this.stopped++
  }
}
