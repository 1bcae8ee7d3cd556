import {attachDeviceProgram, closeFd, detachDeviceProgram, loadDeviceProgram, openCgroup, programFdById, programInfo, queryDevicePrograms} from '../sys/bpf.js'
import {compileDeviceProgram, decodeInstructions, decompileDeviceProgram, deviceProgramLicense, encodeInstructions, type DeviceProgramRule, type EmulatedRules} from './device-program.js'

/** The name nfdctl's programs carry (BPF_OBJ_NAME_LEN is 16 with the NUL), so that an agent restart knows them. */
export const agentProgramName = 'nfdctl_devices'

/** A device program attached to a cgroup v2 directory, read back. */
export interface AttachedDeviceProgram {
  readonly id: number
  readonly name: string
  /** Its rules, for a program of runc's (and nfdctl's) shape; undefined for any other program. */
  readonly rules?: EmulatedRules
}

/** The device programs attached to the cgroup itself (a container's own; its ancestors' are the runtime's business). */
export function devicePrograms(cgroupDir: string): AttachedDeviceProgram[] {
  const cgroup = openCgroup(cgroupDir)
  try {
    return queryDevicePrograms(cgroup).map((id) => {
      const fd = programFdById(id)
      try {
        const info = programInfo(fd)
        return {id, name: info.name, rules: decompileDeviceProgram(decodeInstructions(info.instructions))}
      } finally {
        closeFd(fd)
      }
    })
  } finally {
    closeFd(cgroup)
  }
}

/**
 * Gives the cgroup exactly `rules` (OCI order and semantics): a new program is loaded and takes the place of
 * the one attached, atomically (BPF_F_REPLACE), so that access is never looser or tighter in between.
 * With none attached it is attached; with several (stacked by someone else), it is attached and the others
 * detached, since device programs only ever add restrictions and the new one states all of them.
 */
export function replaceDevicePrograms(cgroupDir: string, rules: readonly DeviceProgramRule[]): {replaced: number[]} {
  const instructions = encodeInstructions(compileDeviceProgram(rules))
  const program = loadDeviceProgram(instructions, deviceProgramLicense, agentProgramName)
  const cgroup = openCgroup(cgroupDir)
  const old: Array<{id: number; fd: number}> = []
  try {
    for (const id of queryDevicePrograms(cgroup)) old.push({fd: programFdById(id), id})
    if (old.length === 1) attachDeviceProgram(cgroup, program, old[0].fd)
    else {
      attachDeviceProgram(cgroup, program)
      for (const {fd} of old) detachDeviceProgram(cgroup, fd)
    }
    return {replaced: old.map((o) => o.id)}
  } finally {
    for (const {fd} of old) closeFd(fd)
    closeFd(cgroup)
    // The cgroup holds the program now; our fd is not needed to keep it.
    closeFd(program)
  }
}

/** Detaches every device program of the cgroup (tests, and undoing an attach). */
export function detachDevicePrograms(cgroupDir: string): void {
  const cgroup = openCgroup(cgroupDir)
  try {
    for (const id of queryDevicePrograms(cgroup)) {
      const fd = programFdById(id)
      try {
        detachDeviceProgram(cgroup, fd)
      } finally {
        closeFd(fd)
      }
    }
  } finally {
    closeFd(cgroup)
  }
}
