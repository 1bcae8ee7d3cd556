import {attachDeviceProgram, BpfError, closeFd, detachDeviceProgram, loadDeviceProgram, openCgroup, programFdById, programInfo, queryDevicePrograms} from '../sys/bpf.js'
import {compileDeviceProgram, decodeInstructions, decompileDeviceProgram, deviceProgramLicense, encodeInstructions, type DeviceProgramRule, type EmulatedRules} from './device-program.js'

/** The name nfdctl's programs carry (BPF_OBJ_NAME_LEN is 16 with the NUL), so that an agent restart knows them. */
export const agentProgramName = 'nfdctl_devices'

/** A device program attached to a cgroup v2 directory, read back. */
export interface AttachedDeviceProgram {
  readonly id: number
  /** Its name; '' for a program that may not be read. */
  readonly name: string
  /** Its rules, for a program of runc's (and nfdctl's) shape; undefined for any other program. */
  readonly rules?: EmulatedRules
  /**
   * Set when the program may not be opened or read (the errno: EPERM or EACCES, an LSM label or a missing
   * capability); then `rules` is undefined, so that the cgroup is not supported rather than empty.
   */
  readonly unreadable?: string
}

/**
 * The device programs attached to the cgroup itself (a container's own; its ancestors' are the runtime's
 * business). runc skips a program it may not open (findAttachedCgroupDeviceFilters: an LSM may label
 * systemd's); here such a program is listed, marked `unreadable` and without rules, since dropping it
 * would make a cgroup look empty to callers that then attach beside it or count it as theirs.
 */
export function devicePrograms(cgroupDir: string): AttachedDeviceProgram[] {
  const cgroup = openCgroup(cgroupDir)
  try {
    return queryDevicePrograms(cgroup).map((id) => {
      let fd: number | undefined
      try {
        fd = programFdById(id)
        const info = programInfo(fd)
        return {id, name: info.name, rules: decompileDeviceProgram(decodeInstructions(info.instructions))}
      } catch (error) {
        if (!(error instanceof BpfError && error.permissionDenied)) throw error
        return {id, name: '', unreadable: error.errnoName}
      } finally {
        if (fd !== undefined) closeFd(fd)
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
 * detached, since device programs only ever add restrictions and the new one states all of them. A program
 * that may not be opened (EPERM, EACCES) can be neither replaced nor detached: that fails with the
 * BPF_PROG_GET_FD_BY_ID error, before anything is loaded or attached.
 */
export function replaceDevicePrograms(cgroupDir: string, rules: readonly DeviceProgramRule[]): {replaced: number[]} {
  const instructions = encodeInstructions(compileDeviceProgram(rules))
  const cgroup = openCgroup(cgroupDir)
  const old: Array<{id: number; fd: number}> = []
  let program: number | undefined
  try {
    for (const id of queryDevicePrograms(cgroup)) old.push({fd: programFdById(id), id})
    program = loadDeviceProgram(instructions, deviceProgramLicense, agentProgramName)
    if (old.length === 1) attachDeviceProgram(cgroup, program, old[0].fd)
    else {
      attachDeviceProgram(cgroup, program)
      for (const {fd} of old) detachDeviceProgram(cgroup, fd)
    }
    return {replaced: old.map((o) => o.id)}
  } finally {
    for (const {fd} of old) closeFd(fd)
    closeFd(cgroup)
    // Attached, the cgroup holds the program; our fd is not needed to keep it.
    if (program !== undefined) closeFd(program)
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
