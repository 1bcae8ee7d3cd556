import {lstat, rm} from 'node:fs/promises'
import {createServer, type Server} from 'node:net'

import type {KeptSocket} from '../../src/lib/kubelet/socket-keeper.js'

/**
 * A real server on a unix socket, kept as kubelet's plugin sockets are: serve() binds anew (a stale file
 * removed first), isServing() compares the file's inode with the one bound, close() removes only our file.
 * `failWith` makes serve() fail (before binding) while it is set.
 */
export class UnixSocketServer implements KeptSocket {
  serves = 0
  failWith: Error | undefined
  #server: Server | undefined
  #inode: number | undefined

  constructor(readonly path: string) {}

  async serve(): Promise<void> {
    await this.close()
    this.serves++
    if (this.failWith !== undefined) throw this.failWith
    await rm(this.path, {force: true})
    const server = createServer((connection) => connection.end())
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.path, () => resolve())
    })
    this.#server = server
    this.#inode = (await lstat(this.path)).ino
  }

  async isServing(): Promise<boolean> {
    if (this.#server === undefined) return false
    const now = await lstat(this.path).catch(() => undefined)
    return now?.ino === this.#inode
  }

  async close(): Promise<void> {
    const server = this.#server
    this.#server = undefined
    if (server === undefined) return
    // A listener whose file was deleted unlinks nothing on close: only our own file is removed.
    const now = await lstat(this.path).catch(() => undefined)
    await new Promise<void>((resolve) => server.close(() => resolve()))
    if (now !== undefined && now.ino === this.#inode) await rm(this.path, {force: true})
  }
}
