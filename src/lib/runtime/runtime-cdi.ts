/**
 * Whether the container runtime hands a claim's CDI devices to its containers, read from its CRI plugin's own
 * configuration (ContainerdClient.criConfig): DRA gives devices by CDI only, so on a runtime that does not, a
 * claim's container would start without its device. The judgement is pure; runtimeSeesDir tells whether a
 * directory the runtime names is the agent's, as the two see them.
 */
import {statSync} from 'node:fs'

import {socketPeerPid} from '../sys/peer-credentials.js'

/**
 * Why claims' devices would not reach their containers on this runtime; undefined when they would. `isCdiDir`
 * says whether a directory of the runtime's cdi_spec_dirs is the agent's --cdi-dir (by default: the same path).
 */
export function runtimeCdiProblem(config: Readonly<Record<string, unknown>> | undefined, cdiDir: string, isCdiDir: (runtimeDir: string) => boolean = (d) => samePath(d, cdiDir)): string | undefined {
  if (config === undefined) return undefined // a runtime that does not say: nothing to judge by
  // containerd 1.7 has enable_cdi, off by default; containerd 2 has no switch (always on) and no enableCDI.
  if (config.enableCDI === false) {
    return "the container runtime has CDI off (containerd's enable_cdi = false, 1.7's default), so claims' devices never reach their containers: set enable_cdi = true in containerd's CRI plugin config and restart it, or run containerd 2"
  }
  const dirs = config.cdiSpecDirs
  if (Array.isArray(dirs) && dirs.every((d) => typeof d === 'string') && !dirs.some(isCdiDir)) {
    return `the container runtime reads CDI specs from ${dirs.join(', ') || 'no directory'}, not from ${cdiDir} where the agent writes them (--cdi-dir), so claims' devices never reach their containers: add ${cdiDir} to containerd's cdi_spec_dirs, or give the agent one of those as --cdi-dir`
  }
  return undefined
}

const samePath = (a: string, b: string): boolean => a.replace(/\/+$/, '') === b.replace(/\/+$/, '')

/**
 * Whether a directory the runtime names (in its own mount namespace) is the agent's `cdiDir` (in the agent's):
 * the same inode, the runtime's path read through its root (/proc/<pid>/root, the process behind its socket).
 * An agent in a pod sees the host's directory at a path of its pod spec, which need not be the host's. Where
 * the runtime's process is not visible (another PID namespace) the paths are compared.
 */
export function runtimeSeesDir(containerdAddress: string, cdiDir: string): (runtimeDir: string) => boolean {
  let pid = 0
  try {
    pid = socketPeerPid(containerdAddress)
  } catch {}
  if (pid <= 0) return (runtimeDir) => samePath(runtimeDir, cdiDir)
  return (runtimeDir) => {
    try {
      const ours = statSync(cdiDir)
      const theirs = statSync(`/proc/${pid}/root${runtimeDir}`)
      return ours.dev === theirs.dev && ours.ino === theirs.ino
    } catch {
      return samePath(runtimeDir, cdiDir)
    }
  }
}
