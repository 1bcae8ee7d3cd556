import type {DeviceRule} from './device-cgroup.js'

/** An OCI `linux.resources.devices` entry: a device cgroup rule that allows or denies. */
export interface DeviceProgramRule extends DeviceRule {
  readonly allow: boolean
}

/** One OCI `linux.resources.devices` entry as the runtime spec's JSON has it. */
export interface OciDeviceCgroup {
  readonly allow: boolean
  readonly type?: string
  readonly major?: number
  readonly minor?: number
  readonly access?: string
}

/**
 * OCI `linux.resources.devices` as rules: no type is `a`, no major or minor (or runc's -1) is `*`. No access
 * is no access (''): such a rule grants and takes nothing, as in runc's emulator, never all of rwm.
 */
export function ociDeviceRules(devices: readonly OciDeviceCgroup[] = []): DeviceProgramRule[] {
  return devices.map((d) => ({access: d.access ?? '', allow: d.allow, major: anyNumber(d.major), minor: anyNumber(d.minor), type: (d.type || 'a') as DeviceProgramRule['type']}))
}

/** An absent number, or runc's Wildcard (-1, which a spec may spell out), stands for any. */
const anyNumber = (n: number | undefined): number | '*' => (n === undefined || n === -1 ? '*' : n)

/** `b7:0`, `c10:200`: a specific rule's device, as a Device's id names it. */
export const ruleDeviceId = (r: DeviceRule): string => `${r.type}${r.major}:${r.minor}`

/**
 * Pure: the rules of a program read back from a cgroup (decompileDeviceProgram), as a list to compile again:
 * its default first (`deny a` or `allow a`), then its exceptions, leaving out the specific allow rules of
 * the devices in `without` (the class devices the agent manages, which it states anew). Whatever else the
 * runtime attached stays exactly as it was, whichever runtime and version built it: nothing is assumed
 * about its standard devices.
 */
export function rulesWithout(attached: EmulatedRules, without: ReadonlySet<string>): DeviceProgramRule[] {
  const own = attached.rules.filter((r) => !(r.allow && r.type !== 'a' && r.major !== '*' && r.minor !== '*' && without.has(ruleDeviceId(r))))
  return [{access: 'rwm', allow: attached.defaultAllow, major: '*', minor: '*', type: 'a'}, ...own.map((r) => ({...r}))]
}

/** The rules a cgroup ends up with once applied in order, as the v1 devices controller keeps them. */
export interface EmulatedRules {
  /** True: everything is allowed except the (deny) rules; false: nothing is, except the (allow) rules. */
  readonly defaultAllow: boolean
  readonly rules: readonly DeviceProgramRule[]
}

const accessOrder = ['r', 'w', 'm'] as const
const sameDevice = (a: DeviceRule, b: DeviceRule): boolean => a.type === b.type && a.major === b.major && a.minor === b.minor
const normalAccess = (access: string): string => accessOrder.filter((c) => access.includes(c)).join('')
const formatProgramRule = (r: DeviceProgramRule): string => `${r.allow ? 'allow' : 'deny'} ${r.type} ${r.major}:${r.minor} ${r.access}`

/**
 * Pure: applies rules in order as runc's devices Emulator does (libcontainer/cgroups/devices/
 * devices_emulator.go), which its cgroup v2 generator runs first so that both versions mean the same.
 * It starts from deny-all, as runc's DeviceFilter does (`new(devicesemulator.Emulator)`), not from a v1
 * cgroup's allow-all. A rule of type `a` resets (allow: everything allowed, deny: nothing); a rule of the
 * other kind than the default adds its access to the exception of exactly that device (merged with an
 * equal one, else appended in order); a rule of the default's kind takes access from that exception,
 * and throws, as runc does, when a wildcard exception covering the device shares access with it (v1 would
 * ignore the rule; runc refuses rather than leave the user believing it took effect). An empty access
 * adds and takes nothing.
 */
export function emulateRules(rules: readonly DeviceProgramRule[]): EmulatedRules {
  let defaultAllow = false
  let exceptions: Array<DeviceProgramRule & {access: string}> = []
  for (const rule of rules) {
    const access = normalAccess(rule.access)
    if (access.length !== rule.access.length) throw new Error(`device rule access must be a subset of rwm, got "${rule.access}"`)
    // The kernel's dev_t: 12-bit majors, 20-bit minors. (Also what keeps the 64-bit compares of runc's
    // layout right: their immediate is sign-extended.)
    if (rule.major !== '*' && !(Number.isInteger(rule.major) && rule.major >= 0 && rule.major <= 0xfff)) throw new Error(`device rule major must be 0-4095 or *, got ${rule.major}`)
    if (rule.minor !== '*' && !(Number.isInteger(rule.minor) && rule.minor >= 0 && rule.minor <= 0xfffff)) throw new Error(`device rule minor must be 0-1048575 or *, got ${rule.minor}`)
    if (rule.type === 'a') {
      defaultAllow = rule.allow
      exceptions = []
      continue
    }
    const existing = exceptions.find((e) => sameDevice(e, rule))
    if (rule.allow === defaultAllow) {
      const covering = exceptions.find(
        (e) => e !== existing && e.type === rule.type && (e.major === '*' || e.major === rule.major) && (e.minor === '*' || e.minor === rule.minor) && [...e.access].some((c) => access.includes(c)),
      )
      if (covering !== undefined) {
        throw new Error(`device rule "${formatProgramRule({...rule, access})}" cannot punch a hole in the wildcard rule "${formatProgramRule(covering)}" (runc refuses it: cgroup v1 would ignore it)`)
      }
      if (existing === undefined) continue
      existing.access = [...existing.access].filter((c) => !access.includes(c)).join('')
      if (existing.access === '') exceptions = exceptions.filter((e) => e !== existing)
    } else if (access === '') continue
    else if (existing === undefined) exceptions.push({...rule, access, allow: !defaultAllow})
    else existing.access = normalAccess(existing.access + access)
  }
  return {defaultAllow, rules: exceptions.map((e) => ({...e}))}
}

// BPF instruction encoding (linux/bpf.h, linux/bpf_common.h).
const op = {
  and32Imm: 0x54, // BPF_ALU | BPF_AND | BPF_K
  exit: 0x95, // BPF_JMP | BPF_EXIT
  jneImm: 0x55, // BPF_JMP | BPF_JNE | BPF_K
  jneReg: 0x5d, // BPF_JMP | BPF_JNE | BPF_X
  loadWord: 0x61, // BPF_LDX | BPF_W | BPF_MEM
  mov32Imm: 0xb4, // BPF_ALU | BPF_MOV | BPF_K
  mov32Reg: 0xbc, // BPF_ALU | BPF_MOV | BPF_X
  rsh32Imm: 0x74, // BPF_ALU | BPF_RSH | BPF_K
} as const
/** struct bpf_cgroup_dev_ctx: access_type (device type low 16 bits, access high 16), major, minor. */
export const deviceType = {b: 1, c: 2} as const
export const deviceAccess = {m: 1, r: 2, w: 4} as const

export interface Instruction {
  readonly code: number
  readonly dst: number
  readonly src: number
  readonly off: number
  readonly imm: number
}

const insn = (code: number, dst = 0, src = 0, off = 0, imm = 0): Instruction => ({code, dst, imm, off, src})
const accessBits = (access: string): number => [...access].reduce((bits, c) => bits | deviceAccess[c as keyof typeof deviceAccess], 0)

/** The licence runc gives its device programs (the kernel needs none in particular for this type). */
export const deviceProgramLicense = 'Apache'

/**
 * Pure: a BPF_PROG_TYPE_CGROUP_DEVICE program for the rules (after emulateRules), in the block layout of
 * runc's devicefilter: the context in r2 (type), r3 (access), r4 (major), r5 (minor); then one block per
 * exception that falls through to the next block unless the type matches, the access asked for is within
 * the rule's (not checked for rwm), and the major and minor match (not checked for `*`), and else returns
 * the rule's verdict; the last block returns the default (deny, for an allow-list). The blocks keep the
 * order emulateRules gives (runc sorts them by major, minor and type instead): every exception has the
 * same verdict, the opposite of the default, so their order cannot change an answer, and keeping it lets
 * a read-back program list the devices in the order they were granted.
 */
export function compileDeviceProgram(rules: readonly DeviceProgramRule[]): Instruction[] {
  const {defaultAllow, rules: emulated} = emulateRules(rules)
  const program: Instruction[] = [
    insn(op.loadWord, 2, 1, 0),
    insn(op.and32Imm, 2, 0, 0, 0xffff),
    insn(op.loadWord, 3, 1, 0),
    insn(op.rsh32Imm, 3, 0, 0, 16),
    insn(op.loadWord, 4, 1, 4),
    insn(op.loadWord, 5, 1, 8),
  ]
  for (const rule of emulated) {
    const checks: Array<(next: number) => Instruction> = [(next) => insn(op.jneImm, 2, 0, next, deviceType[rule.type as 'b' | 'c'])]
    if (rule.access !== 'rwm') {
      const bits = accessBits(rule.access)
      checks.push(
        () => insn(op.mov32Reg, 1, 3),
        () => insn(op.and32Imm, 1, 0, 0, bits),
        (next) => insn(op.jneReg, 1, 3, next),
      )
    }
    if (rule.major !== '*') checks.push((next) => insn(op.jneImm, 4, 0, next, rule.major as number))
    if (rule.minor !== '*') checks.push((next) => insn(op.jneImm, 5, 0, next, rule.minor as number))
    // Offsets count from the instruction after the jump to the first one of the next block.
    const length = checks.length + 2
    for (const [i, make] of checks.entries()) program.push(make(length - i - 1))
    program.push(insn(op.mov32Imm, 0, 0, 0, rule.allow ? 1 : 0), insn(op.exit))
  }
  program.push(insn(op.mov32Imm, 0, 0, 0, defaultAllow ? 1 : 0), insn(op.exit))
  return program
}

/** The program as the kernel takes it: 8 bytes per instruction, little-endian (x86-64, arm64). */
export function encodeInstructions(program: readonly Instruction[]): Buffer {
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach((i, n) => {
    bytes.writeUInt8(i.code, n * 8)
    bytes.writeUInt8(((i.src & 0xf) << 4) | (i.dst & 0xf), n * 8 + 1)
    bytes.writeInt16LE(i.off, n * 8 + 2)
    bytes.writeInt32LE(i.imm, n * 8 + 4)
  })
  return bytes
}

export function decodeInstructions(bytes: Buffer): Instruction[] {
  const program: Instruction[] = []
  for (let n = 0; n + 8 <= bytes.length; n += 8) {
    const regs = bytes.readUInt8(n + 1)
    program.push(insn(bytes.readUInt8(n), regs & 0xf, regs >> 4, bytes.readInt16LE(n + 2), bytes.readInt32LE(n + 4)))
  }
  return program
}

/**
 * Pure: the rules of a program made by compileDeviceProgram (nfdctl's, or runc's: the same block layout),
 * read back from its instructions (BPF_OBJ_GET_INFO_BY_FD), so that an agent that restarts knows what a
 * container has; the rules come in the program's block order (sorted, for runc's). Undefined for a program
 * of any other shape (systemd's, a hand-written one).
 */
export function decompileDeviceProgram(program: readonly Instruction[]): EmulatedRules | undefined {
  const same = (a: Instruction, b: Instruction): boolean => a.code === b.code && a.dst === b.dst && a.src === b.src && a.off === b.off && a.imm === b.imm
  const prologue = compileDeviceProgram([]).slice(0, 6)
  if (program.length < 8 || !prologue.every((p, i) => same(p, program[i]))) return undefined
  const rules: DeviceProgramRule[] = []
  let pc = 6
  for (;;) {
    const at = program[pc]
    if (at?.code === op.mov32Imm && at.dst === 0 && program[pc + 1]?.code === op.exit && pc + 2 === program.length) {
      return {defaultAllow: at.imm !== 0, rules}
    }
    if (at?.code !== op.jneImm || at.dst !== 2 || (at.imm !== deviceType.b && at.imm !== deviceType.c)) return undefined
    const next = pc + 1 + at.off
    const rule: {type: 'b' | 'c'; major: number | '*'; minor: number | '*'; access: string} = {access: 'rwm', major: '*', minor: '*', type: at.imm === deviceType.b ? 'b' : 'c'}
    pc++
    if (program[pc]?.code === op.mov32Reg && program[pc].dst === 1 && program[pc].src === 3) {
      const bits = program[pc + 1]
      if (bits?.code !== op.and32Imm || bits.dst !== 1 || program[pc + 2]?.code !== op.jneReg) return undefined
      rule.access = accessOrder.filter((c) => (bits.imm & deviceAccess[c]) !== 0).join('')
      pc += 3
    }
    if (program[pc]?.code === op.jneImm && program[pc].dst === 4) rule.major = program[pc++].imm >>> 0
    if (program[pc]?.code === op.jneImm && program[pc].dst === 5) rule.minor = program[pc++].imm >>> 0
    const verdict = program[pc]
    if (verdict?.code !== op.mov32Imm || verdict.dst !== 0 || program[pc + 1]?.code !== op.exit || pc + 2 !== next) return undefined
    rules.push({...rule, allow: verdict.imm !== 0})
    pc = next
  }
}
