import {attachDeviceProgram, BpfError, closeFd, loadDeviceProgram, openCgroup, programFdById, programInfo, queryDevicePrograms} from '../sys/bpf.js'
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

/** Whether any device program is attached to the cgroup itself; only counted, none is read. */
export function hasDevicePrograms(cgroupDir: string): boolean {
  const cgroup = openCgroup(cgroupDir)
  try {
    return queryDevicePrograms(cgroup).length > 0
  } finally {
    closeFd(cgroup)
  }
}

/**
 * Gives the cgroup exactly `rules` (OCI order and semantics) in the place of the program `programId`, the one
 * the caller read: a new program is loaded and replaces it atomically (BPF_F_REPLACE), so that access is
 * never looser or tighter in between. Refused with ProgramChangedError, and nothing attached or detached,
 * when that program is no longer the cgroup's only one (the runtime updated the container, someone stacked
 * another): the caller reads again. The kernel checks the last step itself: the replace fails (ENOENT) when
 * the program is no longer attached by then. A program that may not be opened (EPERM, EACCES) fails with
 * the BPF_PROG_GET_FD_BY_ID error, before anything is loaded.
 */
export function replaceDeviceProgram(cgroupDir: string, programId: number, rules: readonly DeviceProgramRule[]): void {
  const instructions = encodeInstructions(compileDeviceProgram(rules))
  const cgroup = openCgroup(cgroupDir)
  let old: number | undefined
  let program: number | undefined
  try {
    const attached = queryDevicePrograms(cgroup)
    if (attached.length !== 1 || attached[0] !== programId) throw new ProgramChangedError(cgroupDir, programId, attached)
    try {
      old = programFdById(programId)
    } catch (error) {
      if (error instanceof BpfError && error.notFound) throw new ProgramChangedError(cgroupDir, programId, [])
      throw error
    }
    program = loadDeviceProgram(instructions, deviceProgramLicense, agentProgramName)
    try {
      attachDeviceProgram(cgroup, program, old)
    } catch (error) {
      if (error instanceof BpfError && error.notFound) throw new ProgramChangedError(cgroupDir, programId, queryDevicePrograms(cgroup))
      throw error
    }
  } finally {
    if (old !== undefined) closeFd(old)
    closeFd(cgroup)
    // Attached, the cgroup holds the program; our fd is not needed to keep it.
    if (program !== undefined) closeFd(program)
  }
}

/** The device programs of a cgroup are no longer the one that was read: nothing was changed. */
export class ProgramChangedError extends Error {
  constructor(
    readonly cgroupDir: string,
    readonly programId: number,
    readonly attached: readonly number[],
  ) {
    super(
      `the device programs of ${cgroupDir} changed since they were read (read: id ${programId}; attached now: ${attached.length === 0 ? 'none' : `id ${attached.join(', ')}`}); not replaced, read again`,
    )
  }
}
