import {lstat, mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import type * as grpc from '@grpc/grpc-js'

import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {
  kubeletDraApi,
  supportedVersions,
  type ClaimRef,
  type ClaimsRequest,
  type NodePrepareResourcesResponse,
  type NodeUnprepareResourcesResponse,
  type NodeWatchResourcesResponse,
  type PluginInfo,
  type RegistrationStatus,
} from '../kubelet/dra-api.js'
import {draDriver} from './resource-slices.js'

/** What kubelet's calls do; the server only carries them. */
export interface DraHandlers {
  prepare(claims: readonly ClaimRef[]): Promise<NodePrepareResourcesResponse>
  unprepare(claims: readonly ClaimRef[]): Promise<NodeUnprepareResourcesResponse>
  /** Every device's health now (each message on the stream is the whole list). */
  health(): NodeWatchResourcesResponse
  /** kubelet's word on the registration. */
  registered(ok: boolean, error: string): void
}

export interface DraPluginServerOptions {
  /** kubelet's plugin registration directory (<kubelet root>/plugins_registry). */
  readonly registrationDir: string
  /** This driver's directory for its service socket (<kubelet root>/plugins/devices.nfdctl.io). */
  readonly pluginDir: string
  readonly handlers: DraHandlers
  readonly logger: Logger
}

/**
 * The driver's kubelet plugin: the Registration service on `<registration dir>/devices.nfdctl.io-reg.sock`
 * (kubelet finds it by watching the directory and asks GetInfo), and DRAPlugin (v1, v1beta1) with
 * DRAResourceHealth (v1, v1alpha1) on `<plugin dir>/dra.sock`. Stale sockets are removed before binding.
 */
export class DraPluginServer {
  readonly registrationSocket: string
  readonly serviceSocket: string
  #servers: grpc.Server[] = []
  #inodes: number[] = []
  readonly #streams = new Set<grpc.ServerWritableStream<unknown, NodeWatchResourcesResponse>>()
  #refresh: NodeJS.Timeout | undefined

  constructor(readonly options: DraPluginServerOptions) {
    this.registrationSocket = join(options.registrationDir, `${draDriver}-reg.sock`)
    this.serviceSocket = join(options.pluginDir, 'dra.sock')
  }

  /** Binds the service socket first, then the registration socket: kubelet may call as soon as it sees the latter. */
  async serve(): Promise<void> {
    await this.close()
    const api = await kubeletDraApi()
    const g = api.grpc
    await mkdir(this.options.pluginDir, {recursive: true})
    await mkdir(this.options.registrationDir, {recursive: true})
    const service = new g.Server()
    for (const definition of api.draPlugin) service.addService(definition, this.#pluginHandlers(g))
    for (const definition of api.health) service.addService(definition, {NodeWatchResources: (stream: grpc.ServerWritableStream<unknown, NodeWatchResourcesResponse>) => this.#watch(stream)})
    await bind(g, service, this.serviceSocket)
    // Kept from here, so that the next close() (the retry's serve()) shuts it down if the registration socket cannot be bound.
    this.#servers = [service]
    const registration = new g.Server()
    registration.addService(api.registration, {
      GetInfo: (_call: unknown, callback: grpc.sendUnaryData<PluginInfo>) => {
        callback(null, {endpoint: this.serviceSocket, name: draDriver, supported_versions: supportedVersions, type: 'DRAPlugin'})
      },
      NotifyRegistrationStatus: (call: grpc.ServerUnaryCall<RegistrationStatus, object>, callback: grpc.sendUnaryData<object>) => {
        this.options.handlers.registered(call.request.plugin_registered, call.request.error)
        callback(null, {})
      },
    })
    this.#servers.push(registration)
    await bind(g, registration, this.registrationSocket)
    this.#inodes = [(await lstat(this.serviceSocket)).ino, (await lstat(this.registrationSocket)).ino]
    // kubelet times each device's health from the message that last named it and reads it as Unknown after
    // 30 s: the whole list goes out again well within that.
    this.#refresh = setInterval(() => this.pushHealth(), healthRefreshMs).unref()
  }

  /** True while both socket files are the ones this server bound. */
  async isServing(): Promise<boolean> {
    if (this.#inodes.length === 0) return false
    const now = await Promise.all([this.serviceSocket, this.registrationSocket].map((s) => lstat(s).catch(() => undefined)))
    return now.every((stat, i) => stat?.ino === this.#inodes[i])
  }

  /** Sends every device's health on each open stream. */
  pushHealth(): void {
    for (const stream of this.#streams) stream.write(this.options.handlers.health())
  }

  /** Stops at once and removes our sockets (the registration one first: kubelet then deregisters the driver). */
  async close(): Promise<void> {
    const servers = this.#servers
    const inodes = this.#inodes
    this.#servers = []
    this.#inodes = []
    clearInterval(this.#refresh)
    for (const stream of this.#streams) stream.end()
    this.#streams.clear()
    for (const server of servers) server.forceShutdown()
    for (const [i, socket] of [this.serviceSocket, this.registrationSocket].entries()) {
      const now = await lstat(socket).catch(() => undefined)
      if (now !== undefined && now.ino === inodes[i]) await rm(socket, {force: true})
    }
  }

  #watch(stream: grpc.ServerWritableStream<unknown, NodeWatchResourcesResponse>): void {
    this.#streams.add(stream)
    const forget = (): void => void this.#streams.delete(stream)
    stream.on('cancelled', forget)
    stream.on('close', forget)
    stream.on('error', forget)
    stream.write(this.options.handlers.health())
  }

  #pluginHandlers(g: typeof grpc): grpc.UntypedServiceImplementation {
    const {handlers, logger} = this.options
    // A failure of the whole call (not of one claim: those are answered per claim) is kubelet's to retry.
    const unary =
      <Res>(run: (claims: readonly ClaimRef[]) => Promise<Res>, what: string) =>
      (call: grpc.ServerUnaryCall<ClaimsRequest, Res>, callback: grpc.sendUnaryData<Res>): void => {
        run(call.request.claims ?? []).then(
          (response) => callback(null, response),
          (error: unknown) => {
            logger.warn({err: errorMessage(error)}, `${what} failed`)
            callback({code: g.status.INTERNAL, details: errorMessage(error)})
          },
        )
      }
    return {
      NodePrepareResources: unary((claims) => handlers.prepare(claims), 'NodePrepareResources'),
      NodeUnprepareResources: unary((claims) => handlers.unprepare(claims), 'NodeUnprepareResources'),
    }
  }
}

const healthRefreshMs = 10_000

async function bind(g: typeof grpc, server: grpc.Server, socket: string): Promise<void> {
  await rm(socket, {force: true})
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix:${socket}`, g.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve()))
  })
}
