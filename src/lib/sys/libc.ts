import koffi from 'koffi'

// The system calls Node lacks, bound once through koffi (FFI to the process's own libc symbols, so glibc
// and musl both work). Only files under src/lib/sys/ may import koffi.

const libc = koffi.load(null as unknown as string)

export const sys = {
  bind: libc.func('int bind(int fd, void *addr, uint32_t addrlen)'),
  close: libc.func('int close(int fd)'),
  connect: libc.func('int connect(int fd, void *addr, uint32_t addrlen)'),
  eventfd: libc.func('int eventfd(unsigned int initval, int flags)'),
  flock: libc.func('int flock(int fd, int operation)'),
  getsockopt: libc.func('int getsockopt(int fd, int level, int name, _Out_ void *val, _Inout_ uint32_t *len)'),
  ioctl: libc.func('int ioctl(int fd, unsigned long request, long arg)'),
  mkdirat: libc.func('int mkdirat(int dirfd, const char *path, uint32_t mode)'),
  mknodat: libc.func('int mknodat(int dirfd, const char *path, uint32_t mode, uint64_t dev)'),
  open: libc.func('int open(const char *path, int flags)'),
  openat: libc.func('int openat(int dirfd, const char *path, int flags, uint32_t mode)'),
  poll: libc.func('int poll(_Inout_ void *fds, unsigned long nfds, int timeout)'),
  read: libc.func('long read(int fd, _Out_ void *buf, size_t n)'),
  recvfrom: libc.func('long recvfrom(int fd, _Out_ void *buf, size_t len, int flags, _Out_ void *src, _Inout_ uint32_t *srclen)'),
  setrlimit: libc.func('int setrlimit(int resource, void *limit)'),
  setsockopt: libc.func('int setsockopt(int fd, int level, int name, void *val, uint32_t len)'),
  socket: libc.func('int socket(int domain, int type, int protocol)'),
  /** For bpf(2), which glibc has no wrapper for. */
  syscall: libc.func('long syscall(long number, ...)'),
  unlinkat: libc.func('int unlinkat(int dirfd, const char *path, int flags)'),
  write: libc.func('long write(int fd, void *buf, size_t n)'),
}

const mallocTrim = (() => {
  try {
    return libc.func('int malloc_trim(size_t pad)')
  } catch {
    return undefined // not glibc (musl has no malloc_trim)
  }
})()

/**
 * Hands the C heap's free pages back to the kernel (glibc's malloc_trim). A daemon that went quiet after a
 * burst otherwise keeps every page its TLS, HTTP/2 and gRPC buffers ever used in its RSS. False where the
 * libc has no such call.
 */
export function releaseFreeNativeMemory(): boolean {
  if (!mallocTrim) return false
  mallocTrim(0)
  return true
}

/** errno of the last synchronous call on this thread (meaningless after `.async()` calls). */
export function errno(): number {
  return koffi.errno()
}

const errnoNames: Record<number, string> = {
  1: 'EPERM',
  2: 'ENOENT',
  4: 'EINTR',
  9: 'EBADF',
  11: 'EAGAIN',
  12: 'ENOMEM',
  13: 'EACCES',
  14: 'EFAULT',
  17: 'EEXIST',
  19: 'ENODEV',
  22: 'EINVAL',
  20: 'ENOTDIR',
  21: 'EISDIR',
  23: 'ENFILE',
  24: 'EMFILE',
  28: 'ENOSPC',
  7: 'E2BIG',
  95: 'EOPNOTSUPP',
  3: 'ESRCH',
  40: 'ELOOP',
  88: 'ENOTSOCK',
  93: 'EPROTONOSUPPORT',
  105: 'ENOBUFS',
  16: 'EBUSY',
  18: 'EXDEV',
  38: 'ENOSYS',
  111: 'ECONNREFUSED',
}

export function errnoText(code: number): string {
  return errnoNames[code] ?? `errno ${code}`
}
