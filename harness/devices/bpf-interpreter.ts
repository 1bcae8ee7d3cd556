import type {Instruction} from '../../src/lib/runtime/device-program.js'

/**
 * Runs a BPF_PROG_TYPE_CGROUP_DEVICE program the way the kernel would, for the instructions device programs
 * use (32-bit ALU with immediates and registers, word loads from the context, conditional jumps, exit), on
 * the context struct bpf_cgroup_dev_ctx {access_type, major, minor}. Anything else throws: a test must not
 * pass on an instruction this interpreter does not understand.
 */
export function runDeviceProgram(program: readonly Instruction[], request: {type: number; access: number; major: number; minor: number}): number {
  const context = [((request.access << 16) | request.type) >>> 0, request.major >>> 0, request.minor >>> 0]
  const r = new Array<number>(11).fill(0)
  r[1] = -1 // the context pointer: only loads through it are allowed
  for (let pc = 0, steps = 0; steps < 4096; steps++) {
    const i = program[pc]
    if (i === undefined) throw new Error(`fell off the program at ${pc}`)
    const source = (i.code & 0x08) !== 0 ? r[i.src] : i.imm >>> 0
    switch (i.code) {
      case 0x61: // ldxw dst, [src + off]
        if (i.src !== 1 || i.off % 4 !== 0 || i.off / 4 > 2) throw new Error(`bad context load at ${pc}`)
        r[i.dst] = context[i.off / 4]
        break
      case 0x54:
      case 0x5c:
        r[i.dst] = (r[i.dst] & source) >>> 0
        break
      case 0x74:
      case 0x7c:
        r[i.dst] = r[i.dst] >>> (source & 31)
        break
      case 0xb4:
      case 0xbc:
        r[i.dst] = source >>> 0
        break
      // 64-bit compares: registers hold zero-extended 32-bit values here, an immediate is sign-extended.
      case 0x55:
        if (i.imm < 0 || r[i.dst] !== i.imm) pc += i.off
        break
      case 0x15:
        if (i.imm >= 0 && r[i.dst] === i.imm) pc += i.off
        break
      case 0x5d:
        if (r[i.dst] !== r[i.src]) pc += i.off
        break
      case 0x1d:
        if (r[i.dst] === r[i.src]) pc += i.off
        break
      case 0x05:
        pc += i.off
        break
      case 0x95:
        return r[0]
      default:
        throw new Error(`instruction 0x${i.code.toString(16)} at ${pc} is not one device programs use`)
    }
    pc++
  }
  throw new Error('the program did not end (a loop?)')
}
