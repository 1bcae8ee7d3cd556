import type {OciSpec} from '../../src/lib/runtime/containerd-client.js'
import {compileDeviceProgram, encodeInstructions, ociDeviceRules, type DeviceProgramRule} from '../../src/lib/runtime/device-program.js'
import {attachDeviceProgram, closeFd, detachDeviceProgram, loadDeviceProgram, openCgroup, programFdById, programInfo, queryDevicePrograms} from '../../src/lib/sys/bpf.js'

/** A rule written as a test reads it: `allow c 1:3 rwm`, `deny a`, `allow b 7:* r`. */
export function ruleOf(text: string): DeviceProgramRule {
  const [verdict, type, numbers = '*:*', access = 'rwm'] = text.split(' ')
  const [major, minor] = numbers.split(':').map((n) => (n === '*' ? '*' : Number(n)))
  return {access, allow: verdict === 'allow', major, minor, type: type as DeviceProgramRule['type']}
}

/**
 * runc's built-in allowed devices (libcontainer/specconv AllowedDevices), in its order: mknod of every char
 * and block device, /dev/null, random, full, tty, zero, urandom, /dev/pts/*, ptmx, and /dev/net/tun, which
 * runc 1.1.x and 1.2.4+ allow and 1.2.0-1.2.3 do not.
 */
const runcAllowed = ['allow c *:* m', 'allow b *:* m', 'allow c 1:3', 'allow c 1:8', 'allow c 1:7', 'allow c 5:0', 'allow c 1:5', 'allow c 1:9', 'allow c 136:*', 'allow c 5:2']
const tun = 'allow c 10:200'

/**
 * The rules of the program runc attaches for a spec on a cgroup v2 host: the spec's linux.resources.devices
 * in order, then its built-in devices (with /dev/net/tun unless `tun` is false: runc 1.2.0-1.2.3). A stand-in
 * for the runtime on this host, whose runc restricts devices through v1; the agent reads what is attached.
 */
export function runcDeviceRules(spec: OciSpec | undefined, options: {tun?: boolean} = {}): DeviceProgramRule[] {
  const builtIn = options.tun === false ? runcAllowed : [...runcAllowed, tun]
  return [...ociDeviceRules(spec?.linux?.resources?.devices), ...builtIn.map(ruleOf)]
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

/**
 * Detaches every device program of the cgroup, or only those named `name` (the agent never detaches a
 * program; a test cleans up).
 */
export function detachDevicePrograms(dir: string, name?: string): void {
  const cgroup = openCgroup(dir)
  try {
    for (const id of queryDevicePrograms(cgroup)) {
      const fd = programFdById(id)
      try {
        if (name === undefined || programInfo(fd).name === name) detachDeviceProgram(cgroup, fd)
      } finally {
        closeFd(fd)
      }
    }
  } finally {
    closeFd(cgroup)
  }
}
