import {fileURLToPath} from 'node:url'

import type * as grpc from '@grpc/grpc-js'
import type * as protobuf from 'protobufjs'

import {unary} from '../grpc-unary.js'
import type {MessageFields} from '../proto-fields.js'
import type {OciDeviceCgroup} from './device-program.js'

/** A containerd container as nfdctl needs it: its id, its labels (the CRI ones name the pod), its OCI spec. */
export interface RuntimeContainer {
  readonly id: string
  readonly labels: Readonly<Record<string, string>>
  /** The OCI runtime spec, parsed from the container's JSON spec; undefined when it has none. */
  readonly spec?: OciSpec
}

/** The parts of an OCI runtime spec nfdctl reads. */
export interface OciSpec {
  /** The container's environment, `NAME=value` (CDI edits land here too). */
  readonly process?: {readonly env?: readonly string[]}
  readonly linux?: {
    readonly cgroupsPath?: string
    readonly resources?: {readonly devices?: readonly OciDeviceCgroup[]}
    /** Device nodes (kubelet's device plugins, CDI, a privileged container's host devices); runc makes its standard ones unlisted. */
    readonly devices?: ReadonlyArray<{readonly path: string; readonly type?: string; readonly major?: number; readonly minor?: number}>
  }
}

/** A container's init process, when it has a task. */
export interface RuntimeTask {
  readonly containerId: string
  readonly pid: number
  readonly status: (typeof taskStatuses)[number]
}

/** Pure: the init PIDs of the running tasks, by container id. */
export const runningPids = (tasks: readonly RuntimeTask[]): Map<string, number> => new Map(tasks.filter((t) => t.status === 'RUNNING').map((t) => [t.containerId, t.pid]))

/** The Status enum's names, by number (enums are loaded as their names); a unit test holds them to the .proto. */
export const taskStatuses = ['UNKNOWN', 'CREATED', 'RUNNING', 'STOPPED', 'PAUSED', 'PAUSING'] as const

/** One event from containerd's stream, its payload decoded by the type URL's bare name. */
export interface RuntimeEvent {
  readonly namespace: string
  readonly topic: string
  /** e.g. containerd.events.TaskStart; undefined payload for a type nfdctl does not decode. */
  readonly type: string
  readonly payload?: Record<string, unknown>
}

const protoDir = fileURLToPath(new URL('../../../proto/containerd/', import.meta.url))

interface Loaded {
  readonly grpc: typeof grpc
  readonly cri: grpc.ServiceClientConstructor
  readonly containers: grpc.ServiceClientConstructor
  readonly tasks: grpc.ServiceClientConstructor
  readonly events: grpc.ServiceClientConstructor
  readonly payloads: protobuf.Root
}

let loaded: Promise<Loaded> | undefined

async function containerdApi(): Promise<Loaded> {
  loaded ??= (async () => {
    const [grpcModule, {loadSync}, protobufjs] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader'), import('protobufjs')])
    const options = {defaults: true, enums: String, keepCase: true, longs: Number}
    const packageOf = (file: string): grpc.GrpcObject => grpcModule.loadPackageDefinition(loadSync(`${protoDir}${file}`, options))
    const service = (root: grpc.GrpcObject, path: string): grpc.ServiceClientConstructor =>
      path.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], root) as grpc.ServiceClientConstructor
    const payloads = await new protobufjs.default.Root().load(`${protoDir}event-payloads.proto`, {keepCase: true})
    return {
      containers: service(packageOf('containers.proto'), 'containerd.services.containers.v1.Containers'),
      cri: service(packageOf('cri-status.proto'), 'runtime.v1.RuntimeService'),
      events: service(packageOf('events.proto'), 'containerd.services.events.v1.Events'),
      grpc: grpcModule,
      payloads,
      tasks: service(packageOf('tasks.proto'), 'containerd.services.tasks.v1.Tasks'),
    }
  })()
  return loaded
}

export interface ContainerdClientOptions {
  /** containerd's gRPC socket, e.g. /run/containerd/containerd.sock. */
  readonly address: string
  /** The containerd namespace of the containers (kubelet's CRI: k8s.io). */
  readonly namespace: string
  readonly timeoutMs?: number
}

/**
 * containerd over gRPC (@grpc/grpc-js), with containerd's published API: containers list/get, tasks list
 * (each container's init PID), and the event stream. Every call but Subscribe carries the namespace.
 */
export class ContainerdClient {
  #api: Loaded | undefined
  #clients: grpc.Client[] = []
  readonly #kept = new Map<'containers' | 'tasks', grpc.Client>()

  constructor(readonly options: ContainerdClientOptions) {}

  /** `filters` in containerd's syntax, e.g. `labels."io.cri-containerd.kind"==container` (OR-ed when several). */
  async listContainers(filters: readonly string[] = []): Promise<RuntimeContainer[]> {
    const answer = await this.#unary<{containers: WireContainer[]}>('containers', 'List', {filters})
    return answer.containers.map(fromWire)
  }

  /** The container, or undefined when containerd does not know it (any more). */
  async getContainer(id: string): Promise<RuntimeContainer | undefined> {
    try {
      const answer = await this.#unary<{container: WireContainer}>('containers', 'Get', {id})
      return fromWire(answer.container)
    } catch (error) {
      if ((error as grpc.ServiceError).code === 5) return undefined // NOT_FOUND
      throw error
    }
  }

  /** Every task of the namespace: the container's init process (exec processes are not listed). */
  async listTasks(): Promise<RuntimeTask[]> {
    const answer = await this.#unary<{tasks: WireProcess[]}>('tasks', 'List', {filter: ''})
    // containerd names an init process by its container's id in `id` and leaves container_id empty.
    return answer.tasks.map((t) => ({containerId: t.container_id || t.id, pid: t.pid, status: t.status}))
  }

  /** The task (init process) of one container, or undefined when it has none (not started, or gone). */
  async getTask(containerId: string): Promise<RuntimeTask | undefined> {
    try {
      const {process} = await this.#unary<{process: WireProcess}>('tasks', 'Get', {container_id: containerId})
      return {containerId: process.container_id || process.id, pid: process.pid, status: process.status}
    } catch (error) {
      if ((error as grpc.ServiceError).code === 5) return undefined // NOT_FOUND
      throw error
    }
  }

  /**
   * The CRI plugin's configuration (CRI Status, verbose: its info["config"], JSON), or undefined when the
   * socket serves no CRI or says no configuration. Not namespaced; a channel of its own, closed after the call.
   */
  async criConfig(): Promise<Record<string, unknown> | undefined> {
    await this.#load()
    const client = this.#client('cri')
    try {
      const {info} = await unary<object, {info: Record<string, string>}>(client, 'Status', {verbose: true}, this.options.timeoutMs ?? 10_000)
      const config: unknown = info.config === undefined ? undefined : JSON.parse(info.config)
      return typeof config === 'object' && config !== null ? (config as Record<string, unknown>) : undefined
    } catch (error) {
      if ((error as grpc.ServiceError).code === 12) return undefined // UNIMPLEMENTED: no CRI plugin on this socket
      throw error
    } finally {
      client.close()
      this.#clients.splice(this.#clients.indexOf(client), 1)
    }
  }

  /**
   * Subscribes to the namespace's container and task events. `onEvent` gets each one decoded; `onEnd` is called
   * once when the stream ends for any reason (containerd stopped or restarted): re-list, then subscribe again.
   * Resolves once the stream is open, so that a list made after it misses nothing.
   */
  async subscribe(onEvent: (event: RuntimeEvent) => void, onEnd: (error: Error) => void): Promise<() => void> {
    const api = await this.#load()
    const client = this.#client('events')
    // Up to the timeout for containerd to take the connection: the stream below would not say it cannot.
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + (this.options.timeoutMs ?? 10_000), (error) => (error ? reject(error) : resolve())))
    const filters = [`namespace==${this.options.namespace},topic~="^/(containers|tasks)/"`]
    const call = (client as unknown as {Subscribe: (r: object) => grpc.ClientReadableStream<WireEnvelope>}).Subscribe({filters})
    let ended = false
    const end = (error: Error): void => {
      if (ended) return
      ended = true
      onEnd(error)
    }
    call.on('data', (envelope: WireEnvelope) => onEvent(decodeEnvelope(api.payloads, envelope)))
    call.on('error', (error: Error) => end(error))
    call.on('end', () => end(new Error('containerd closed the event stream')))
    // containerd sends the stream's headers with its first event, so on a quiet node they may not come for
    // hours: the stream counts as open once they come or once the connection has carried the request for a
    // moment (containerd's handler has subscribed by then), whichever is first.
    await new Promise<void>((resolve, reject) => {
      const settled = setTimeout(resolve, subscribeSettleMs)
      call.once('metadata', () => {
        clearTimeout(settled)
        resolve()
      })
      call.once('error', (error: Error) => {
        clearTimeout(settled)
        reject(error)
      })
    })
    return () => {
      ended = true
      call.cancel()
    }
  }

  close(): void {
    for (const client of this.#clients.splice(0)) client.close()
    this.#kept.clear()
  }

  async #load(): Promise<Loaded> {
    this.#api ??= await containerdApi()
    return this.#api
  }

  #client(service: 'containers' | 'tasks' | 'events' | 'cri'): grpc.Client {
    const api = this.#api!
    const client = new api[service](`unix:${this.options.address}`, api.grpc.credentials.createInsecure())
    this.#clients.push(client)
    return client
  }

  /**
   * One channel per service, kept: a fresh one costs a connection and an HTTP/2 handshake, several
   * milliseconds on the hot-plug path. Right after containerd restarts a kept channel fails with UNAVAILABLE
   * (or sits in its reconnect back-off): the call is then made once more on a new channel.
   */
  async #unary<T>(service: 'containers' | 'tasks', method: string, request: object): Promise<T> {
    const api = await this.#load()
    const metadata = new api.grpc.Metadata()
    metadata.set('containerd-namespace', this.options.namespace)
    const deadlineMs = this.options.timeoutMs ?? 10_000
    let client = this.#kept.get(service)
    if (client !== undefined) {
      try {
        return await unary<object, T>(client, method, request, deadlineMs, metadata)
      } catch (error) {
        if ((error as grpc.ServiceError).code !== api.grpc.status.UNAVAILABLE) throw error
        this.#drop(service, client)
      }
    }
    client = this.#client(service)
    this.#kept.set(service, client)
    try {
      return await unary<object, T>(client, method, request, deadlineMs, metadata)
    } catch (error) {
      if ((error as grpc.ServiceError).code === api.grpc.status.UNAVAILABLE) this.#drop(service, client)
      throw error
    }
  }

  #drop(service: 'containers' | 'tasks', client: grpc.Client): void {
    client.close()
    this.#clients.splice(this.#clients.indexOf(client), 1)
    if (this.#kept.get(service) === client) this.#kept.delete(service)
  }
}

const subscribeSettleMs = 200

// The messages as nfdctl reads them; each `*Fields` value is held against the .proto by a unit test.
interface WireAny {
  type_url: string
  value: Buffer
}
const wireAnyFields = {type_url: 'string', value: 'bytes'} satisfies MessageFields<WireAny>

interface WireContainer {
  id: string
  labels: Record<string, string>
  spec?: WireAny | null
}
export const wireContainerFields = {id: 'string', labels: ['map', 'string'], spec: wireAnyFields} satisfies MessageFields<WireContainer>

interface WireProcess {
  container_id: string
  id: string
  pid: number
  status: RuntimeTask['status']
}
export const wireProcessFields = {container_id: 'string', id: 'string', pid: 'number', status: 'string'} satisfies MessageFields<WireProcess>

interface WireEnvelope {
  namespace: string
  topic: string
  event?: WireAny | null
}
export const wireEnvelopeFields = {event: wireAnyFields, namespace: 'string', topic: 'string'} satisfies MessageFields<WireEnvelope>

/** The spec is parsed only when read: a batch lists every container, and reads the specs of a few. */
function fromWire(container: WireContainer): RuntimeContainer {
  const raw = container.spec?.value
  let parsed: {spec?: OciSpec} | undefined
  return {
    id: container.id,
    labels: {...container.labels},
    get spec(): OciSpec | undefined {
      if (parsed === undefined) {
        try {
          parsed = {spec: raw && raw.length > 0 ? (JSON.parse(raw.toString('utf8')) as OciSpec) : undefined}
        } catch {
          parsed = {} // not JSON: a spec type nfdctl does not read
        }
      }
      return parsed.spec
    },
  }
}

/** Type URLs are bare (`containerd.events.TaskStart`); a `type.googleapis.com/` prefix is accepted too. */
function decodeEnvelope(payloads: protobuf.Root, envelope: WireEnvelope): RuntimeEvent {
  const type = (envelope.event?.type_url ?? '').replace(/^.*\//, '')
  let payload: Record<string, unknown> | undefined
  const messageType = type.startsWith('containerd.events.') ? lookupType(payloads, type) : undefined
  if (messageType !== undefined && envelope.event?.value) {
    payload = messageType.toObject(messageType.decode(envelope.event.value), {defaults: true, longs: Number}) as Record<string, unknown>
  }
  return {namespace: envelope.namespace, payload, topic: envelope.topic, type}
}

function lookupType(root: protobuf.Root, name: string): protobuf.Type | undefined {
  try {
    return root.lookupType(name)
  } catch {
    return undefined // an event type nfdctl does not decode (images, snapshots, exec)
  }
}
