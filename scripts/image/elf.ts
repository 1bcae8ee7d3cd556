/** What the loader needs to know about a 64-bit little-endian ELF file (every file this image holds). */
export interface ElfInfo {
  /** `e_machine`: 62 x86-64, 183 AArch64. */
  readonly machine: number
  /** PT_INTERP: the dynamic loader an executable names (absent in shared libraries). */
  readonly interpreter?: string
  /** DT_NEEDED: the sonames it links against, in order. */
  readonly needed: readonly string[]
}

const PT_LOAD = 1
const PT_DYNAMIC = 2
const PT_INTERP = 3
const DT_NULL = 0n
const DT_NEEDED = 1n
const DT_STRTAB = 5n

export function isElf(data: Uint8Array): boolean {
  return data.length >= 4 && data[0] === 0x7f && data[1] === 0x45 && data[2] === 0x4c && data[3] === 0x46
}

/** The ELF header's `e_machine` alone (the first 20 bytes suffice). */
export function elfMachine(data: Buffer): number {
  if (!isElf(data) || data.length < 20) throw new Error('not an ELF file')
  return data.readUInt16LE(18)
}

/**
 * Reads the program headers, the loader and the DT_NEEDED entries. The string table is found through its
 * address in the dynamic section, mapped to a file offset by the PT_LOAD segment that holds it, as the
 * loader itself finds it (section headers may be stripped).
 */
export function readElf(data: Buffer): ElfInfo {
  if (!isElf(data)) throw new Error('not an ELF file')
  if (data[4] !== 2 || data[5] !== 1) throw new Error('not a 64-bit little-endian ELF file')
  const machine = data.readUInt16LE(18)
  const phoff = Number(data.readBigUInt64LE(32))
  const phentsize = data.readUInt16LE(54)
  const phnum = data.readUInt16LE(56)
  const segments: Array<{type: number; offset: number; vaddr: bigint; filesz: number}> = []
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize
    segments.push({filesz: Number(data.readBigUInt64LE(at + 32)), offset: Number(data.readBigUInt64LE(at + 8)), type: data.readUInt32LE(at), vaddr: data.readBigUInt64LE(at + 16)})
  }
  const interp = segments.find((s) => s.type === PT_INTERP)
  const interpreter = interp === undefined ? undefined : cString(data, interp.offset)
  const dynamic = segments.find((s) => s.type === PT_DYNAMIC)
  if (dynamic === undefined) return {interpreter, machine, needed: []}
  const neededOffsets: bigint[] = []
  let strtab: bigint | undefined
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
    const tag = data.readBigInt64LE(at)
    if (tag === DT_NULL) break
    if (tag === DT_NEEDED) neededOffsets.push(data.readBigUInt64LE(at + 8))
    if (tag === DT_STRTAB) strtab = data.readBigUInt64LE(at + 8)
  }
  if (neededOffsets.length === 0) return {interpreter, machine, needed: []}
  if (strtab === undefined) throw new Error('ELF file has DT_NEEDED entries but no DT_STRTAB')
  const address = strtab
  const load = segments.find((s) => s.type === PT_LOAD && address >= s.vaddr && address < s.vaddr + BigInt(s.filesz))
  if (load === undefined) throw new Error('ELF string table is outside every loaded segment')
  const tableOffset = load.offset + Number(address - load.vaddr)
  return {interpreter, machine, needed: neededOffsets.map((offset) => cString(data, tableOffset + Number(offset)))}
}

function cString(data: Buffer, offset: number): string {
  const end = data.indexOf(0, offset)
  if (end < 0) throw new Error('unterminated string in ELF file')
  return data.toString('latin1', offset, end)
}
