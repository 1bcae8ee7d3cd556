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
const SO_ERROR = 4
const MSG_DONTWAIT = 0x40
const POLLIN = 0x1
const POLLERR = 0x8
const POLLHUP = 0x10
const POLLNVAL = 0x20
const EAGAIN = 11
const EINTR = 4
const ENOBUFS = 105
/** poll() failing this many times in a row (each retried once at once) ends the loop. */
const maxPollFailures = 3

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
 *
 * The loop cannot spin: every wake-up either reads something, reports an overflow, or ends the loop with an
 * error naming the cause (poll failing, POLLERR/POLLHUP/POLLNVAL on either descriptor) through `onError`.
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

  /** Opens and binds the socket; events flow once this resolves. Rejects when any step fails. */
  async start(): Promise<void> {
    if (this.#loop || this.#fd >= 0) throw new Error('uevent socket already started')
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
    const wake = sys.eventfd(0, SOCK_CLOEXEC | SOCK_NONBLOCK) as number // EFD_CLOEXEC, EFD_NONBLOCK: same values
    if (wake < 0) {
      const code = errno()
      sys.close(fd)
      throw new NfdctlError(`cannot create the eventfd that wakes the uevent socket's poll: ${errnoText(code)}`, ExitCode.failed)
    }
    this.#fd = fd
    this.#wake = wake
    this.#loop = this.#run().catch((error: unknown) => this.handlers.onError(error instanceof Error ? error : new Error(String(error))))
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
    // A descriptor poll() reported as closed (POLLNVAL) was set to -1: its number may belong to someone else now.
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
    let failures = 0
    while (!this.#stopping) {
      let ready = await new Promise<number>((resolve, reject) => {
        sys.poll.async(fds, 2, -1, (error: unknown, value: number) => (error ? reject(error as Error) : resolve(value)))
      })
      if (this.#stopping) break
      if (ready < 0) {
        // errno of the worker thread is lost: ask again here, at once, where errno can be read.
        ready = sys.poll(fds, 2, 0) as number
        if (ready < 0) {
          const code = errno()
          if (code !== EINTR || ++failures >= maxPollFailures) throw new AbortedError(`netlink uevent socket: poll failed: ${errnoText(code)}; no more uevents`)
          continue
        }
      }
      failures = 0
      if (ready === 0) continue // the synchronous retry found nothing ready yet: wait again
      this.#checkWake(fds.readInt16LE(14))
      const revents = fds.readInt16LE(6)
      if (revents & POLLNVAL) {
        this.#fd = -1
        throw new AbortedError('netlink uevent socket: poll reports its descriptor closed underneath (POLLNVAL); no more uevents')
      }
      if (revents & POLLERR) this.#takePendingError()
      if (revents & POLLHUP) throw new AbortedError('netlink uevent socket: poll reports a hang-up (POLLHUP); no more uevents')
      if (revents & POLLIN) this.#drain(buffer, source)
    }
  }

  /** The eventfd only ever becomes readable through stop(); anything else about it ends the loop. */
  #checkWake(revents: number): void {
    if (revents & POLLNVAL) {
      this.#wake = -1
      throw new AbortedError('netlink uevent socket: poll reports its wake eventfd closed underneath (POLLNVAL); no more uevents')
    }
    if (revents & (POLLERR | POLLHUP)) throw new AbortedError(`netlink uevent socket: poll reports ${revents & POLLERR ? 'POLLERR' : 'POLLHUP'} on its wake eventfd; no more uevents`)
    if (revents & POLLIN) sys.read(this.#wake, Buffer.alloc(8), 8) // woken without stop(): clear it, or the next poll returns at once
  }

  /** POLLERR: the socket's pending error (SO_ERROR, which also clears it). ENOBUFS is an overflow; others end the loop. */
  #takePendingError(): void {
    const value = Buffer.alloc(4)
    if ((sys.getsockopt(this.#fd, SOL_SOCKET, SO_ERROR, value, [4]) as number) < 0) {
      throw new AbortedError(`netlink uevent socket: poll reports POLLERR and reading the error failed: ${errnoText(errno())}; no more uevents`)
    }
    const code = value.readInt32LE(0)
    if (code === ENOBUFS) {
      this.handlers.onOverflow()
      return
    }
    throw new AbortedError(`netlink uevent socket failed: poll reports POLLERR (${code === 0 ? 'no pending error' : errnoText(code)}); no more uevents`)
  }

  /** Reads every queued datagram (until EAGAIN), handing the kernel's to onDatagram. */
  #drain(buffer: Buffer, source: Buffer): void {
    for (;;) {
      const length = sys.recvfrom(this.#fd, buffer, buffer.length, MSG_DONTWAIT, source, [12]) as number
      if (length < 0) {
        const code = errno()
        if (code === EAGAIN || code === EINTR) return
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
