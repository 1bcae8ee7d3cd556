import {AbortedError, NfdctlError, ExitCode} from '../errors.js'
import {errno, errnoText, sys} from './libc.js'

const AF_NETLINK = 16
const SOCK_RAW = 3
const SOCK_CLOEXEC = 0o2_000_000
const SOCK_NONBLOCK = 0o4000
const NETLINK_KOBJECT_UEVENT = 15
const KERNEL_GROUP = 1
const SOL_SOCKET = 1
const SO_RCVBUF = 8
const SO_RCVBUFFORCE = 33
const MSG_DONTWAIT = 0x40
const POLLIN = 1
const EAGAIN = 11
const EINTR = 4
const ENOBUFS = 105

export interface NetlinkHandlers {
  /** One datagram from the kernel (sender port 0); the buffer is reused after the call returns. */
  readonly onDatagram: (datagram: Buffer) => void
  /** The kernel dropped events (receive buffer overflow): the caller must rescan. */
  readonly onOverflow: () => void
  /** The socket failed for good; the loop has ended. */
  readonly onError: (error: Error) => void
}

/**
 * A NETLINK_KOBJECT_UEVENT socket on the kernel's multicast group. Only poll() runs on koffi's worker
 * thread (errno is not reliable after async calls); recvfrom runs synchronously with MSG_DONTWAIT. An
 * eventfd wakes the pending poll() so stop() is immediate and the process can exit.
 */
export class NetlinkUeventSocket {
  #fd = -1
  #wake = -1
  #stopping = false
  #loop?: Promise<void>

  /** `receiveBufferBytes`: the socket buffer to ask for (default 8 MiB; tests use a tiny one to force overflow). */
  constructor(
    readonly handlers: NetlinkHandlers,
    readonly receiveBufferBytes = 8 << 20,
  ) {}

  /** Opens and binds the socket; events flow once this resolves. */
  start(): Promise<void> {
    if (this.#loop) throw new Error('uevent socket already started')
    const fd = sys.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT) as number
    if (fd < 0) throw new NfdctlError(`cannot open a netlink uevent socket: ${errnoText(errno())}`, ExitCode.failed)
    const address = Buffer.alloc(12) // struct sockaddr_nl {u16 family; u16 pad; u32 pid; u32 groups}
    address.writeUInt16LE(AF_NETLINK, 0)
    address.writeUInt32LE(KERNEL_GROUP, 8)
    if ((sys.bind(fd, address, 12) as number) < 0) {
      const code = errno()
      sys.close(fd)
      throw new NfdctlError(`cannot bind the netlink uevent socket: ${errnoText(code)}`, ExitCode.failed)
    }
    // A large buffer rides out bursts (SO_RCVBUFFORCE needs CAP_NET_ADMIN; fall back quietly).
    const size = Buffer.alloc(4)
    size.writeInt32LE(this.receiveBufferBytes)
    if ((sys.setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, size, 4) as number) < 0) sys.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, size, 4)
    this.#fd = fd
    this.#wake = sys.eventfd(0, SOCK_CLOEXEC) as number
    this.#loop = this.#run().catch((error: unknown) => this.handlers.onError(error instanceof Error ? error : new Error(String(error))))
    return Promise.resolve()
  }

  /** Wakes the poll, ends the loop and closes both descriptors. Idempotent; safe before start. */
  async stop(): Promise<void> {
    if (this.#stopping) return this.#loop
    this.#stopping = true
    if (this.#wake >= 0) {
      const one = Buffer.alloc(8)
      one.writeBigUInt64LE(1n)
      sys.write(this.#wake, one, 8)
    }
    await this.#loop
    if (this.#wake >= 0) sys.close(this.#wake)
    if (this.#fd >= 0) sys.close(this.#fd)
    this.#wake = -1
    this.#fd = -1
  }

  async #run(): Promise<void> {
    const buffer = Buffer.alloc(64 * 1024)
    const source = Buffer.alloc(12)
    const fds = Buffer.alloc(16) // two struct pollfd {int fd; short events; short revents}
    fds.writeInt32LE(this.#fd, 0)
    fds.writeInt16LE(POLLIN, 4)
    fds.writeInt32LE(this.#wake, 8)
    fds.writeInt16LE(POLLIN, 12)
    while (!this.#stopping) {
      const ready = await new Promise<number>((resolve, reject) => {
        sys.poll.async(fds, 2, -1, (error: unknown, value: number) => (error ? reject(error as Error) : resolve(value)))
      })
      if (this.#stopping) break
      if (ready <= 0) continue
      for (;;) {
        const length = sys.recvfrom(this.#fd, buffer, buffer.length, MSG_DONTWAIT, source, [12]) as number
        if (length < 0) {
          const code = errno()
          if (code === EAGAIN || code === EINTR) break
          if (code === ENOBUFS) {
            this.handlers.onOverflow()
            continue
          }
          throw new AbortedError(`netlink uevent socket failed: ${errnoText(code)}`)
        }
        // Only the kernel (port id 0): user space can send to the same group.
        if (source.readUInt32LE(4) !== 0) continue
        this.handlers.onDatagram(buffer.subarray(0, length))
      }
    }
  }
}
