import {lstat, rm} from 'node:fs/promises'
import {join} from 'node:path'

import type * as grpc from '@grpc/grpc-js'

import {kubeletApi, type RegisterRequest} from '../../src/lib/kubelet/device-plugin-api.js'
import type {KubeletRegistrar} from '../../src/lib/kubelet/socket-keeper.js'

/**
 * kubelet's registration side for a plugin under test: a real `kubelet.sock` in `dir` serving kubelet's
 * gRPC Registration service, a new one on each start as a kubelet restart makes. It is also a registrar
 * (register() without gRPC) for a keeper tested on its own. Both record what registered and can be told to refuse.
 */
export class FakeKubelet implements KubeletRegistrar {
  readonly path: string
  /** When each registration was accepted (performance.now()), through register(). */
  readonly registrations: number[] = []
  /** The Register calls kubelet.sock accepted, in order (the device plugins register through gRPC). */
  readonly requests: RegisterRequest[] = []
  /** When the keeper asked for the running kubelet (performance.now()). */
  readonly asked: number[] = []
  refuseWith: Error | undefined
  // Earlier servers stay open until stop(): their sockets' inodes are not reused, so each start is a new identity.
  readonly #servers: grpc.Server[] = []

  constructor(readonly dir: string) {
    this.path = join(dir, 'kubelet.sock')
  }

  /** Starts (or restarts) kubelet: a new kubelet.sock. */
  async start(): Promise<void> {
    const api = await kubeletApi()
    await rm(this.path, {force: true})
    const server = new api.grpc.Server()
    server.addService(api.registration.service, {
      Register: (call: grpc.ServerUnaryCall<RegisterRequest, object>, callback: grpc.sendUnaryData<object>) => {
        if (this.refuseWith !== undefined) {
          callback({code: api.grpc.status.FAILED_PRECONDITION, details: this.refuseWith.message})
          return
        }
        this.requests.push(call.request)
        callback(null, {})
      },
    })
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix:${this.path}`, api.grpc.ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve()))
    })
    this.#servers.push(server)
  }

  async stop(): Promise<void> {
    for (const server of this.#servers.splice(0)) server.forceShutdown()
    await rm(this.path, {force: true})
  }

  /** The resource names registered through kubelet.sock, in order. */
  get resourceNames(): string[] {
    return this.requests.map((r) => r.resource_name)
  }

  async kubelet(): Promise<number | undefined> {
    this.asked.push(performance.now())
    const stat = await lstat(this.path).catch(() => undefined)
    return stat?.isSocket() ? stat.ino : undefined
  }

  async register(): Promise<void> {
    if (this.refuseWith !== undefined) throw this.refuseWith
    this.registrations.push(performance.now())
  }
}
