import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../controlplane/control-plane.js'
import {waitFor} from '../process/wait.js'
import type {TestNode} from './node.js'

/** A test node and the control plane it is registered with, with an admin client on it. */
export interface NodeEnv {
  readonly node: TestNode
  readonly plane: ControlPlane
  readonly client: KubeClient
}

/** Creates a namespace and waits for its `default` ServiceAccount (kube-controller-manager makes it; pod admission needs it). */
export async function createNamespace(env: NodeEnv, name: string, labels: Readonly<Record<string, string>> = {}): Promise<void> {
  await env.client.request('POST', '/api/v1/namespaces', {body: {metadata: {labels, name}}})
  await waitFor(
    `ServiceAccount ${name}/default`,
    async () => {
      await env.client.request('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)
      return true
    },
    {timeoutMs: 30_000},
  )
}

export interface PodSpec {
  readonly name: string
  /** Default: default. */
  readonly namespace?: string
  readonly command: readonly string[]
  readonly limits?: Readonly<Record<string, string>>
  readonly annotations?: Readonly<Record<string, string>>
  /** A second container, `sidecar`, that sleeps and asks for nothing. */
  readonly sidecar?: boolean
}

export interface RunningPod {
  readonly name: string
  readonly namespace: string
  readonly uid: string
  /** containerd's id of the pod's container `main` (for `node.exec`). */
  readonly containerId: string
  /** containerd's ids of all its containers, by name. */
  readonly containerIds: Readonly<Record<string, string>>
}

/** Creates a one-container busybox pod on the node (no scheduler here: spec.nodeName) and waits until it runs. */
export async function runPod(env: NodeEnv, spec: PodSpec): Promise<RunningPod> {
  await createPod(env, spec)
  return waitForPod(env, spec.namespace === undefined ? spec.name : `${spec.namespace}/${spec.name}`)
}

/** A pod named `namespace/name`, or by a plain name in namespace default. */
function podRef(ref: string): {namespace: string; name: string} {
  const [namespace, name] = ref.includes('/') ? ref.split('/', 2) : ['default', ref]
  return {name, namespace}
}

function podPath(ref: string): string {
  const {name, namespace} = podRef(ref)
  return `/api/v1/namespaces/${namespace}/pods/${name}`
}

export async function createPod(env: NodeEnv, spec: PodSpec): Promise<void> {
  await env.client.request('POST', `/api/v1/namespaces/${spec.namespace ?? 'default'}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {annotations: spec.annotations, name: spec.name},
      spec: {
        automountServiceAccountToken: false,
        containers: [
          {command: spec.command, image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'main', resources: {limits: spec.limits}},
          ...(spec.sidecar ? [{command: ['sleep', '3600'], image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'sidecar'}] : []),
        ],
        nodeName: env.node.name,
        terminationGracePeriodSeconds: 1,
      },
    },
  })
}

interface PodObject {
  metadata: {uid: string}
  status?: {phase?: string; reason?: string; message?: string; containerStatuses?: Array<{name: string; containerID?: string; state?: {waiting?: {reason?: string; message?: string}}}>}
}

/** Waits until the pod (`name`, or `namespace/name`) runs. */
export async function waitForPod(env: NodeEnv, ref: string, timeoutMs = 30_000): Promise<RunningPod> {
  const {name, namespace} = podRef(ref)
  return waitFor(
    `pod ${ref} Running`,
    async () => {
      const pod = await env.client.request<PodObject>('GET', podPath(ref))
      if (pod.status?.phase === 'Failed') throw new Error(`pod ${name} failed: ${pod.status.reason}: ${pod.status.message}`)
      const statuses = pod.status?.containerStatuses ?? []
      if (pod.status?.phase !== 'Running' || statuses.length === 0 || statuses.some((c) => c.containerID === undefined)) return undefined
      const containerIds = Object.fromEntries(statuses.map((c) => [c.name, c.containerID!.replace(/^containerd:\/\//, '')]))
      return {containerId: containerIds.main, containerIds, name, namespace, uid: pod.metadata.uid}
    },
    {intervalMs: 100, timeoutMs},
  ).catch(async (error: Error) => {
    // What kubelet last said about the containers that did not start (a runtime's refusal ends up there).
    const pod = await env.client.request<PodObject>('GET', podPath(ref)).catch(() => undefined)
    const waiting = (pod?.status?.containerStatuses ?? []).flatMap((c) => (c.state?.waiting === undefined ? [] : [`${c.name}: ${c.state.waiting.reason}: ${c.state.waiting.message ?? ''}`]))
    if (waiting.length > 0) error.message += ` (${waiting.join('; ')})`
    throw error
  })
}

/** The pod's phase, reason and message as the API server has them. */
export async function podStatus(env: NodeEnv, name: string): Promise<{phase?: string; reason?: string; message?: string}> {
  const pod = await env.client.request<PodObject>('GET', `/api/v1/namespaces/default/pods/${name}`)
  return {message: pod.status?.message, phase: pod.status?.phase, reason: pod.status?.reason}
}

/** Deletes pods (`name`, or `namespace/name`) and waits until kubelet has removed them (their devices are free again). */
export async function deletePods(env: NodeEnv, names: readonly string[]): Promise<void> {
  for (const name of names) await env.client.request('DELETE', podPath(name), {body: {gracePeriodSeconds: 0}}).catch(() => {})
  for (const name of names) {
    await waitFor(
      `pod ${name} gone`,
      async () => {
        try {
          await env.client.request('GET', podPath(name))
          return false
        } catch {
          return true
        }
      },
      {timeoutMs: 30_000},
    )
  }
}

/** What the pod's container (default `main`, first run) wrote, from kubelet's pod log files. */
export async function podLog(env: NodeEnv, pod: Pick<RunningPod, 'uid'>, container = 'main'): Promise<string> {
  const podsDir = join(env.node.kubelet.options.dir, 'pod-logs')
  const podDir = (await readdir(podsDir)).find((d) => d.endsWith(pod.uid))
  if (podDir === undefined) return ''
  const text = await readFile(join(podsDir, podDir, container, '0.log'), 'utf8').catch(() => '')
  // CRI log lines: <time> <stream> <tag> <text>
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ').slice(3).join(' '))
    .join('\n')
}

/** The Node's allocatable count of a resource, as kubelet last reported it. */
export async function allocatable(env: NodeEnv, resource: string): Promise<number> {
  const node = await env.client.request<{status?: {allocatable?: Record<string, string>; capacity?: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
  return Number(node.status?.allocatable?.[resource] ?? 0)
}
