import koffi from 'koffi'

import {errno, errnoText, sys} from './libc.js'

// bpf(2) for cgroup device programs, through libc's syscall(): Node has no binding and glibc no wrapper.
// Attribute layouts are union bpf_attr's from linux/bpf.h; numbers are x86-64's and arm64's.
const sysBpf = process.arch === 'arm64' ? 280 : 321
const commands = {BPF_OBJ_GET_INFO_BY_FD: 15, BPF_PROG_ATTACH: 8, BPF_PROG_DETACH: 9, BPF_PROG_GET_FD_BY_ID: 13, BPF_PROG_LOAD: 5, BPF_PROG_QUERY: 16} as const
const progTypeCgroupDevice = 15
const attachCgroupDevice = 6
const attachFlags = {allowMulti: 2, replace: 4} as const
const attrSize = 128

let memlockRaised = false

/** Kernels before 5.11 charge BPF programs to RLIMIT_MEMLOCK (64 KiB by default): lift it once, as runc does. */
function raiseMemlock(): void {
  if (memlockRaised) return
  memlockRaised = true
  const unlimited = Buffer.alloc(16, 0xff) // struct rlimit {RLIM_INFINITY, RLIM_INFINITY}
  sys.setrlimit(8 /* RLIMIT_MEMLOCK */, unlimited) // failing only matters on old kernels, where the load then says so
}

/** A bpf(2) failure: which command, and errno. */
export class BpfError extends Error {
  constructor(
    readonly command: string,
    readonly code: number,
    detail = '',
  ) {
    super(`bpf(${command}) failed: ${errnoText(code)}${detail}`)
  }

  /** EPERM or EACCES: the caller lacks a capability, or an LSM refuses it this object. */
  get permissionDenied(): boolean {
    return this.code === 1 || this.code === 13
  }

  /** ENOENT: no such program (freed), or the program to replace is not attached (any more). */
  get notFound(): boolean {
    return this.code === 2
  }

  get errnoName(): string {
    return errnoText(this.code)
  }
}

function bpf(command: keyof typeof commands, attr: Buffer, detail?: string): number {
  const result = Number(sys.syscall(sysBpf, 'int', commands[command], 'void *', attr, 'unsigned int', attr.length))
  if (result < 0) throw new BpfError(detail === undefined ? command : `${command} ${detail}`, errno())
  return result
}

const address = (buffer: Buffer): bigint => koffi.address(buffer)

export function closeFd(fd: number): void {
  sys.close(fd)
}

/** Room for the verifier's explanation of a refusal; loads that succeed take no log at all. */
const verifierLogBytes = 1024 * 1024

/**
 * BPF_PROG_LOAD of a BPF_PROG_TYPE_CGROUP_DEVICE program; returns its fd (close it). A program the
 * verifier refuses fails with the verifier's log in the message.
 */
export function loadDeviceProgram(instructions: Buffer, license: string, name: string): number {
  raiseMemlock()
  const licenseText = Buffer.from(`${license}\0`)
  const load = (log?: Buffer): number => {
    const attr = Buffer.alloc(attrSize)
    attr.writeUInt32LE(progTypeCgroupDevice, 0)
    attr.writeUInt32LE(instructions.length / 8, 4)
    attr.writeBigUInt64LE(address(instructions), 8)
    attr.writeBigUInt64LE(address(licenseText), 16)
    if (log !== undefined) {
      attr.writeUInt32LE(1, 24) // log level 1: the verifier explains a refusal
      attr.writeUInt32LE(log.length, 28)
      attr.writeBigUInt64LE(address(log), 32)
    }
    Buffer.from(name.slice(0, 15)).copy(attr, 48) // prog_name, NUL-terminated in 16 bytes
    return bpf('BPF_PROG_LOAD', attr)
  }
  // Without a log first: at level 1 the verifier logs every instruction it walks, so a large valid
  // program (hundreds of rules) fills any fixed buffer and the load fails with ENOSPC for that alone.
  try {
    return load()
  } catch (error) {
    if (!(error instanceof BpfError)) throw error
    // Again with the log, only to say why. The first errno is the refusal: the second may be ENOSPC
    // from a full log, and a load that now succeeds is the program wanted, so it is kept.
    const log = Buffer.alloc(verifierLogBytes)
    try {
      return load(log)
    } catch (again) {
      if (!(again instanceof BpfError)) throw again
      const end = log.indexOf(0)
      const text = log
        .subarray(0, end < 0 ? log.length : end)
        .toString()
        .trim()
      if (text === '') throw error
      throw new BpfError('BPF_PROG_LOAD', error.code, `; the verifier said: ${text.split('\n').slice(-4).join(' | ')}`)
    }
  }
}

/** The IDs of the device programs attached to a cgroup directory fd (not its ancestors'). */
export function queryDevicePrograms(cgroupFd: number): number[] {
  for (let room = 16; ; room *= 4) {
    const ids = Buffer.alloc(room * 4)
    const attr = Buffer.alloc(attrSize)
    attr.writeUInt32LE(cgroupFd, 0)
    attr.writeUInt32LE(attachCgroupDevice, 4)
    attr.writeBigUInt64LE(address(ids), 16)
    attr.writeUInt32LE(room, 24)
    try {
      bpf('BPF_PROG_QUERY', attr)
    } catch (error) {
      if (error instanceof BpfError && error.code === 28 && room < 1024) continue // ENOSPC: more than room
      throw error
    }
    const count = attr.readUInt32LE(24)
    return Array.from({length: count}, (_, i) => ids.readUInt32LE(i * 4))
  }
}

/** An fd for a loaded program by its ID (close it). */
export function programFdById(id: number): number {
  const attr = Buffer.alloc(attrSize)
  attr.writeUInt32LE(id, 0)
  return bpf('BPF_PROG_GET_FD_BY_ID', attr, `(id ${id})`)
}

export interface ProgramInfo {
  readonly id: number
  readonly type: number
  readonly name: string
  /** The instructions as the kernel holds them (after the verifier), 8 bytes each. */
  readonly instructions: Buffer
}

/** BPF_OBJ_GET_INFO_BY_FD on a program: what is attached, read back (root needed for the instructions). */
export function programInfo(fd: number): ProgramInfo {
  const info = Buffer.alloc(256)
  const attr = Buffer.alloc(attrSize)
  const ask = (): void => {
    attr.writeUInt32LE(fd, 0)
    attr.writeUInt32LE(info.length, 4)
    attr.writeBigUInt64LE(address(info), 8)
    bpf('BPF_OBJ_GET_INFO_BY_FD', attr)
  }
  ask()
  // struct bpf_prog_info: type 0, id 4, xlated_prog_len 20, xlated_prog_insns 32, name 64.
  const length = info.readUInt32LE(20)
  const instructions = Buffer.alloc(length)
  info.fill(0)
  info.writeUInt32LE(length, 20)
  info.writeBigUInt64LE(address(instructions), 32)
  ask()
  const name = info.subarray(64, 80)
  return {id: info.readUInt32LE(4), instructions, name: name.subarray(0, Math.max(0, name.indexOf(0))).toString(), type: info.readUInt32LE(0)}
}

/**
 * Attaches a device program to a cgroup (BPF_F_ALLOW_MULTI); with `replaceFd`, atomically in the place of
 * exactly that attached program (BPF_F_REPLACE, replace_bpf_fd), so the cgroup is never without one nor with
 * both, and the others attached stay. The kernel refuses it (ENOENT) when that program is not attached to
 * the cgroup (any more): nothing changes then.
 */
export function attachDeviceProgram(cgroupFd: number, programFd: number, replaceFd?: number): void {
  const attr = Buffer.alloc(attrSize)
  attr.writeUInt32LE(cgroupFd, 0)
  attr.writeUInt32LE(programFd, 4)
  attr.writeUInt32LE(attachCgroupDevice, 8)
  attr.writeUInt32LE(attachFlags.allowMulti | (replaceFd === undefined ? 0 : attachFlags.replace), 12)
  if (replaceFd !== undefined) attr.writeUInt32LE(replaceFd, 16)
  bpf('BPF_PROG_ATTACH', attr, replaceFd === undefined ? undefined : '(BPF_F_REPLACE)')
}

export function detachDeviceProgram(cgroupFd: number, programFd: number): void {
  const attr = Buffer.alloc(attrSize)
  attr.writeUInt32LE(cgroupFd, 0)
  attr.writeUInt32LE(programFd, 4)
  attr.writeUInt32LE(attachCgroupDevice, 8)
  bpf('BPF_PROG_DETACH', attr)
}

/** Opens a cgroup directory for attach and query (close it). */
export function openCgroup(dir: string): number {
  const fd = sys.open(dir, 0o200000 /* O_DIRECTORY */ | 0o2000000 /* O_CLOEXEC */) as number
  if (fd < 0) throw new OpenError(dir, errno())
  return fd
}

/** open(2) of a cgroup directory failed; ENOENT when the cgroup is gone (its container exited). */
class OpenError extends Error {
  constructor(
    readonly path: string,
    readonly code: number,
  ) {
    super(`open(2) of cgroup directory ${path} failed: ${errnoText(code)}`)
  }
}
