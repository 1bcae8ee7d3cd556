import {lstat, rm} from 'node:fs/promises'
import {createServer, type Server} from 'node:net'
import {join} from 'node:path'

import type {KubeletRegistrar} from '../../src/lib/kubelet/socket-keeper.js'

/**
 * kubelet's registration side for a plugin under test: a real `kubelet.sock` in `dir`, a new one on each
 * start as a kubelet restart makes, and a registrar that records what registered and can be told to refuse.
 */
export class FakeKubelet implements KubeletRegistrar {
  readonly path: string
  /** When each registration was accepted (performance.now()). */
  readonly registrations: number[] = []
  /** When the keeper asked for the running kubelet (performance.now()). */
  readonly asked: number[] = []
  refuseWith: Error | undefined
  // Earlier sockets stay open until stop(): their inodes are not reused, so each start is a new identity.
  readonly #servers: Server[] = []

  constructor(readonly dir: string) {
    this.path = join(dir, 'kubelet.sock')
  }

  /** Starts (or restarts) kubelet: a new kubelet.sock. */
  async start(): Promise<void> {
    await rm(this.path, {force: true})
    const server = createServer((connection) => connection.end())
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.path, () => resolve())
    })
    this.#servers.push(server)
  }

  async stop(): Promise<void> {
    for (const server of this.#servers.splice(0)) await new Promise<void>((resolve) => server.close(() => resolve()))
    await rm(this.path, {force: true})
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
