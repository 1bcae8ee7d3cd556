import {readFile} from 'node:fs/promises'

import {gcKinds} from '../src/lib/gc/kinds.js'
import type {KubeClient} from '../src/lib/kube/kube-client.js'
import {metadataListAccept} from '../src/lib/kube/metadata-list.js'
import {collectionPath} from '../src/lib/kube/resource.js'
import {exists, nodeFeaturePath, topologyPath} from '../harness/controlplane/seed.js'
import {waitFor} from '../harness/process/wait.js'

/** Resident and peak resident memory of a running process, as the kernel counts them. */
export async function memoryOf(pid: number): Promise<{rssMb: number; peakMb: number}> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN)
  return {peakMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024}
}

/** NodeFeatures plus NodeResourceTopologies, from one-item pages and the server's remaining count. */
export async function countObjects(client: KubeClient): Promise<number> {
  let total = 0
  for (const kind of gcKinds) {
    const page = await client.request<{items: unknown[]; metadata: {remainingItemCount?: number}}>('GET', collectionPath(kind.resource), {accept: metadataListAccept, query: {limit: 1}})
    total += page.items.length + (page.metadata.remainingItemCount ?? 0)
  }
  return total
}

/** Deletes the Nodes one after another; each is timed from its DELETE until both of its objects are gone. */
export async function timeNodeDeletions(client: KubeClient, nodes: readonly string[]): Promise<number[]> {
  const latencies: number[] = []
  for (const node of nodes) {
    const started = performance.now()
    await client.request('DELETE', `/api/v1/nodes/${node}`)
    await waitFor(`objects of ${node} gone`, async () => !(await exists(client, nodeFeaturePath('nfd', node))) && !(await exists(client, topologyPath(node))), {intervalMs: 5, timeoutMs: 10_000})
    latencies.push(performance.now() - started)
  }
  return latencies
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

/** One line of a benchmark's table: figure, value, and the budget with its verdict (or a remark). */
export function row(name: string, value: string, budget = ''): string {
  return `${name.padEnd(44)} ${value.padEnd(14)} ${budget}`.trimEnd()
}

export function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'FAIL'
}
