// A pod timed from its creation until its container has used its device, with where the time went: what
// bench:dra measures for a pod asking by ResourceClaim, by resource limit, and on a second node.
import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {deletePods, type NodeEnv} from '../harness/node/pods.js'
import type {CliProcess} from '../harness/process/cli-process.js'
import {waitFor} from '../harness/process/wait.js'

/** Milliseconds from a pod's creation (the POST answered) to each step of its start. */
export interface PodStart {
  /** Its container `main` wrote its marker line, as containerd stamps it in the pod's log. */
  readonly readMs: number
  /** The API showed spec.nodeName (its claims made and allocated); polled every 20 ms. */
  readonly scheduledMs: number
  /** The API showed the pod Running (kubelet's status manager posted it). */
  readonly runningMs: number
  /** The agent logged `claim prepared` for the pod's claim; undefined when no such line was found. */
  readonly preparedMs?: number
}

interface PodObject {
  metadata: {name: string; uid: string}
  spec?: {nodeName?: string}
  status?: {phase?: string}
}

interface ClaimObject {
  metadata: {ownerReferences?: Array<{uid: string}>}
}

interface AgentLine {
  msg: string
  time: number
  claim?: string
}

/**
 * Creates the pod `name` (`manifest`) in `namespace`, times its start until its container `main` logs ` <marker>` (its
 * command writes it once it has read its device), then deletes it and waits until its claims are gone, so
 * that the next pod can have the same device. `agent` is the DRA driver of the node the pod lands on.
 */
export async function timePodStart(env: NodeEnv, agent: CliProcess, namespace: string, name: string, manifest: object, marker: string): Promise<PodStart> {
  const created = Date.now()
  await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: manifest})
  let scheduled: number | undefined
  const running = await waitFor(
    `${name} Running`,
    async () => {
      const pod = await env.client.request<PodObject>('GET', `/api/v1/namespaces/${namespace}/pods/${name}`)
      const now = Date.now()
      if (pod.spec?.nodeName !== undefined) scheduled ??= now
      return pod.status?.phase === 'Running' ? {at: now, uid: pod.metadata.uid} : undefined
    },
    {intervalMs: 20, timeoutMs: 120_000},
  )
  const line = await waitFor(`${name}'s ${marker} line`, async () => (await podLogLines(env, namespace, name, running.uid)).find((l) => l.endsWith(` ${marker}`)), {timeoutMs: 10_000})
  // The claim of a pod asking by ResourceClaimTemplate is `<pod>-<request>-…`, by limit `<pod>-extended-resources-…`.
  const prepared = agent.json<AgentLine>().find((l) => l.msg === 'claim prepared' && l.claim?.startsWith(`${namespace}/${name}-`))
  await deletePods(env, [`${namespace}/${name}`])
  // kube-controller-manager deletes the claims made for the pod (their owner), the scheduler's for a limit included.
  const ownClaims = async (): Promise<number> =>
    (await env.client.request<{items: ClaimObject[]}>('GET', `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims`)).items.filter((c) =>
      (c.metadata.ownerReferences ?? []).some((o) => o.uid === running.uid),
    ).length
  await waitFor(`${name}'s claims deleted`, async () => (await ownClaims()) === 0, {timeoutMs: 30_000})
  return {
    preparedMs: prepared === undefined ? undefined : prepared.time - created,
    readMs: criTime(line.split(' ')[0]!) - created,
    runningMs: running.at - created,
    scheduledMs: scheduled! - created,
  }
}

/** The raw CRI log lines (`<time> <stream> <tag> <text>`) of a pod's container `main` on the node. */
export async function podLogLines(env: NodeEnv, namespace: string, pod: string, uid: string): Promise<string[]> {
  const dir = join(env.node.kubelet.options.dir, 'pod-logs', `${namespace}_${pod}_${uid}`, 'main')
  const files = await readdir(dir).catch((): string[] => [])
  if (!files.includes('0.log')) return []
  return (await readFile(join(dir, '0.log'), 'utf8')).split('\n').filter(Boolean)
}

/** A CRI log timestamp (RFC 3339, nanoseconds) in epoch milliseconds with the sub-millisecond part kept. */
export function criTime(stamp: string): number {
  const fraction = /\.(\d+)Z$/.exec(stamp)?.[1] ?? '0'
  return Date.parse(stamp) + Number(`0.${fraction.slice(3) || '0'}`)
}
