import {errno, errnoText, sys} from './libc.js'

const AF_UNIX = 1
const SOCK_STREAM = 1
const SOCK_CLOEXEC = 0o2_000_000
const SOL_SOCKET = 1
const SO_PEERCRED = 17

/**
 * The PID of the process that listens on a unix socket, as this process's PID namespace numbers it
 * (SO_PEERCRED): 0 when that process is not visible from here (it lives in a PID namespace that is not
 * this one or below it). Throws when the socket cannot be connected to.
 */
export function socketPeerPid(path: string): number {
  const address = Buffer.alloc(110) // struct sockaddr_un {u16 family; char path[108]}
  const name = Buffer.from(path)
  if (name.length >= 108) throw new Error(`socket path too long for a unix socket: ${path}`)
  address.writeUInt16LE(AF_UNIX, 0)
  name.copy(address, 2)
  const fd = sys.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) as number
  if (fd < 0) throw new Error(`cannot open a unix socket: ${errnoText(errno())}`)
  try {
    if ((sys.connect(fd, address, 2 + name.length + 1) as number) < 0) throw new Error(`cannot connect to ${path}: ${errnoText(errno())}`)
    const credentials = Buffer.alloc(12) // struct ucred {pid_t pid; uid_t uid; gid_t gid}
    if ((sys.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, credentials, [12]) as number) < 0) throw new Error(`cannot read the peer of ${path}: ${errnoText(errno())}`)
    return credentials.readInt32LE(0)
  } finally {
    sys.close(fd)
  }
}
