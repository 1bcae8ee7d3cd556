import {connect, createServer, type Server, type Socket} from 'node:net'

interface Relay {
  readonly client: Socket
  readonly upstream: Socket
  /** The client sent bytes (a request) since arm(). */
  asked: boolean
}

/**
 * A TCP relay on 127.0.0.1 in front of the API server that can lose one answer. Once armed, the first
 * answer on a connection that was already open (TLS done) and has since carried a request is dropped and
 * the connection cut: the request reached the server and was carried out, and the client sees a network
 * that failed after the fact. TLS passes through untouched.
 */
export class DroppingProxy {
  readonly #relays = new Set<Relay>()
  #armedOn?: Set<Relay>
  #dropped = 0

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** On `port` when given: a client configured for it before it listened then finds the API server there. */
  static async start(target: URL, port = 0): Promise<DroppingProxy> {
    let proxy: DroppingProxy | undefined
    const server = createServer((client) => proxy!.#relay(client, target))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', resolve)
    })
    proxy = new DroppingProxy(server, `https://127.0.0.1:${(server.address() as {port: number}).port}`)
    return proxy
  }

  /** Drops the next answer to a request sent over a connection open now. */
  arm(): void {
    for (const relay of this.#relays) relay.asked = false
    this.#armedOn = new Set(this.#relays)
  }

  /** Answers dropped so far. */
  get dropped(): number {
    return this.#dropped
  }

  async close(): Promise<void> {
    for (const {client, upstream} of this.#relays) {
      client.destroy()
      upstream.destroy()
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  #relay(client: Socket, target: URL): void {
    const relay: Relay = {asked: false, client, upstream: connect(Number(target.port), target.hostname)}
    const {upstream} = relay
    this.#relays.add(relay)
    const cut = (): void => {
      client.destroy()
      upstream.destroy()
      this.#relays.delete(relay)
    }
    for (const socket of [client, upstream]) socket.on('error', cut).on('close', cut)
    client.on('data', (chunk: Buffer) => {
      relay.asked = true
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (this.#armedOn?.has(relay) && relay.asked) {
        this.#armedOn = undefined
        this.#dropped++
        cut()
        return
      }
      client.write(chunk)
    })
  }
}
