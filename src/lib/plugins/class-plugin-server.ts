import {lstat, rm} from 'node:fs/promises'

import type * as grpc from '@grpc/grpc-js'

import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import type {ClassAllocation} from './class-allocation.js'
import {
  kubeletApi,
  type AllocateRequest,
  type AllocateResponse,
  type DevicePluginOptions,
  type ListAndWatchResponse,
  type PreferredAllocationRequest,
  type PreferredAllocationResponse,
} from '../kubelet/device-plugin-api.js'
import type {PluginMetrics} from './plugin-metrics.js'

/**
 * The gRPC DevicePlugin service of one class on its own unix socket. Each serve() binds a new server (a
 * stale socket file is removed first); kubelet deletes plugin sockets when it starts, and the plugin then
 * serves again on a fresh socket. isServing() tells whether the socket file is still the one bound.
 */
export class ClassPluginServer {
  #server: grpc.Server | undefined
  #inode: number | undefined
  readonly #streams = new Set<grpc.ServerWritableStream<unknown, ListAndWatchResponse>>()

  constructor(
    readonly allocation: ClassAllocation,
    readonly socketPath: string,
    private readonly metrics: PluginMetrics,
    private readonly log: Logger,
    /** Resolves once the numbers of the devices answered are recorded as the agent's (OwnedDevices.saved). */
    private readonly beforeAllocate: () => Promise<void> = () => Promise.resolve(),
  ) {}

  get options(): DevicePluginOptions {
    return {get_preferred_allocation_available: this.allocation.deviceClass.spec.allocation === 'Device', pre_start_required: false}
  }

  async serve(): Promise<void> {
    await this.close()
    const api = await kubeletApi()
    await rm(this.socketPath, {force: true})
    const server = new api.grpc.Server()
    server.addService(api.devicePlugin, this.#handlers(api.grpc))
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix:${this.socketPath}`, api.grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve()))
    })
    this.#server = server
    this.#inode = (await lstat(this.socketPath)).ino
  }

  /** True while the socket file on disk is the one this server bound. */
  async isServing(): Promise<boolean> {
    if (this.#server === undefined) return false
    const now = await lstat(this.socketPath).catch(() => undefined)
    return now !== undefined && now.ino === this.#inode
  }

  /** Sends the class's current list on every open ListAndWatch stream. */
  push(): void {
    for (const stream of this.#streams) this.#send(stream)
  }

  /** Stops at once (open ListAndWatch streams would hold a graceful shutdown) and removes our socket. */
  async close(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    for (const stream of this.#streams) stream.end()
    this.#streams.clear()
    if (server === undefined) return
    server.forceShutdown()
    const now = await lstat(this.socketPath).catch(() => undefined)
    if (now !== undefined && now.ino === this.#inode) await rm(this.socketPath, {force: true})
  }

  #send(stream: grpc.ServerWritableStream<unknown, ListAndWatchResponse>): void {
    stream.write({devices: this.allocation.listAndWatch()})
    this.metrics.listAndWatchSends.inc({class: this.allocation.name})
  }

  #handlers(g: typeof grpc): grpc.UntypedServiceImplementation {
    const name = this.allocation.name
    return {
      Allocate: (call: grpc.ServerUnaryCall<AllocateRequest, AllocateResponse>, callback: grpc.sendUnaryData<AllocateResponse>) => {
        let responses: AllocateResponse['container_responses']
        try {
          responses = call.request.container_requests.map((r) => {
            this.metrics.allocateCalls.inc({class: name})
            return this.allocation.allocate(r.devices_ids)
          })
        } catch (error) {
          this.metrics.errors.inc({class: name, kind: 'allocate'})
          this.log.warn({class: name, err: errorMessage(error)}, 'allocate refused')
          callback({code: g.status.FAILED_PRECONDITION, details: errorMessage(error)})
          return
        }
        // A number handed out is the agent's to take back, even after a crash: on disk before kubelet has it.
        this.beforeAllocate().then(
          () => {
            this.log.info({class: name, devices: call.request.container_requests.map((r) => r.devices_ids)}, 'allocated')
            callback(null, {container_responses: responses})
          },
          (error: unknown) => {
            this.metrics.errors.inc({class: name, kind: 'allocate'})
            this.log.error({class: name, err: errorMessage(error)}, 'allocate refused: the device numbers cannot be recorded')
            callback({code: g.status.UNAVAILABLE, details: `cannot record the device numbers handed out: ${errorMessage(error)}`})
          },
        )
      },
      GetDevicePluginOptions: (_call: unknown, callback: grpc.sendUnaryData<DevicePluginOptions>) => callback(null, this.options),
      GetPreferredAllocation: (call: grpc.ServerUnaryCall<PreferredAllocationRequest, PreferredAllocationResponse>, callback: grpc.sendUnaryData<PreferredAllocationResponse>) => {
        const chosen = this.allocation.preferredAllocation(call.request)
        this.log.debug({chosen, class: name}, 'preferred allocation')
        callback(null, {container_responses: chosen.map((deviceIDs) => ({deviceIDs}))})
      },
      ListAndWatch: (stream: grpc.ServerWritableStream<unknown, ListAndWatchResponse>) => {
        this.#streams.add(stream)
        const forget = (): void => void this.#streams.delete(stream)
        stream.on('cancelled', forget)
        stream.on('close', forget)
        stream.on('error', forget)
        this.#send(stream)
      },
      PreStartContainer: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, {}),
    }
  }
}
