import {spawn} from 'node:child_process'
import {readFile, readlink} from 'node:fs/promises'
import {setTimeout as sleep} from 'node:timers/promises'
import {basename} from 'node:path'

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

/**
 * Node's own floor under a running Node process: the same executable with the same flags (read from its
 * /proc entries), idle with node:https loaded and nothing else, its RSS after a second. No Node program that
 * talks to an API server is resident below it.
 */
export async function nodeFloorOf(pid: number): Promise<{rssMb: number; flags: string[]}> {
  const [executable, cmdline] = await Promise.all([readlink(`/proc/${pid}/exe`), readFile(`/proc/${pid}/cmdline`, 'utf8')])
  const flags = nodeFlagsOf(cmdline.split('\0').slice(1))
  const child = spawn(executable, [...flags, '-e', "process.getBuiltinModule('node:https'); setTimeout(() => {}, 60_000)"], {stdio: 'ignore'})
  try {
    await sleep(1000)
    return {flags, rssMb: (await memoryOf(child.pid!)).rssMb}
  } finally {
    child.kill('SIGKILL')
  }
}

/** Node's options whose value may come as the next argument (`--import <module>`), not after `=`. */
const flagsWithSeparateValue = new Set(['-r', '--require', '--import', '--loader', '--experimental-loader', '-C', '--conditions', '--env-file', '--title'])

/** The flags at the head of Node's arguments, before the script (a preload's `--import <module>` among them). */
function nodeFlagsOf(args: readonly string[]): string[] {
  let end = 0
  while (end < args.length && args[end]!.startsWith('-')) end += flagsWithSeparateValue.has(args[end]!) ? 2 : 1
  return args.slice(0, end)
}

/** What a budget leaves over Node's own floor (in the budget's unit), for the row that prints the floor. */
export function roomOverFloor(budget: number, floor: number, unit: string): string {
  const room = budget - floor
  return room >= 0 ? `leaves ${room.toFixed(0)} ${unit} over it` : `is ${(-room).toFixed(0)} ${unit} below it`
}

/** Where a process's resident pages are, from /proc/<pid>/smaps: its executable's, other files', anonymous. */
export interface ResidentBreakdown {
  readonly nodeBinaryKb: number
  readonly otherFilesKb: number
  /** The other files with the most resident pages, largest first (three at most). */
  readonly topFiles: ReadonlyArray<{name: string; kb: number}>
  /** Heaps (V8's and the C library's), stacks and every other mapping without a file. */
  readonly anonymousKb: number
  readonly threads: number
}

export async function residentBreakdownOf(pid: number): Promise<ResidentBreakdown> {
  const [smaps, executable, status] = await Promise.all([readFile(`/proc/${pid}/smaps`, 'utf8'), readlink(`/proc/${pid}/exe`), readFile(`/proc/${pid}/status`, 'utf8')])
  const byFile = new Map<string, number>()
  let [nodeBinaryKb, anonymousKb] = [0, 0]
  let path = ''
  for (const line of smaps.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line)
    if (header !== null) {
      path = header[1]
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss === null) continue
    const kb = Number(rss[1])
    if (path === executable) nodeBinaryKb += kb
    else if (path.startsWith('/') && !path.startsWith('/memfd:')) byFile.set(path, (byFile.get(path) ?? 0) + kb)
    else anonymousKb += kb
  }
  const files = [...byFile].map(([file, kb]) => ({kb, name: basename(file)})).sort((a, b) => b.kb - a.kb)
  return {
    anonymousKb,
    nodeBinaryKb,
    otherFilesKb: files.reduce((sum, f) => sum + f.kb, 0),
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN),
    topFiles: files.slice(0, 3),
  }
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
