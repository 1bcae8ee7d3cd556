import {compileDeviceProgram, encodeInstructions, type DeviceProgramRule} from '../../src/lib/runtime/device-program.js'
import {attachDeviceProgram, closeFd, loadDeviceProgram, openCgroup} from '../../src/lib/sys/bpf.js'

/** A rule written as a test reads it: `allow c 1:3 rwm`, `deny a`, `allow b 7:* r`. */
export function ruleOf(text: string): DeviceProgramRule {
  const [verdict, type, numbers = '*:*', access = 'rwm'] = text.split(' ')
  const [major, minor] = numbers.split(':').map((n) => (n === '*' ? '*' : Number(n)))
  return {access, allow: verdict === 'allow', major, minor, type: type as DeviceProgramRule['type']}
}

/**
 * Attaches a program for `rules` beside whatever the cgroup has (BPF_F_ALLOW_MULTI), under another name than
 * the agent's: what runc attaches on a cgroup v2 host, which this hybrid host's runc does not.
 */
export function attachRuntimeProgram(dir: string, rules: readonly DeviceProgramRule[], name = 'runtime'): void {
  attachProgram(dir, encodeInstructions(compileDeviceProgram(rules)), name)
}

/** Loads the instructions as a device program and attaches it beside whatever the cgroup has. */
export function attachProgram(dir: string, instructions: Buffer, name: string): void {
  const cgroup = openCgroup(dir)
  let program: number | undefined
  try {
    program = loadDeviceProgram(instructions, 'Apache', name)
    attachDeviceProgram(cgroup, program)
  } finally {
    if (program !== undefined) closeFd(program)
    closeFd(cgroup)
  }
}
