/**
 * Whether the container runtime hands a claim's CDI devices to its containers, read from its CRI plugin's own
 * configuration (ContainerdClient.criConfig): DRA gives devices by CDI only, so on a runtime that does not, a
 * claim's container would start without its device. Pure.
 */

/** Why claims' devices would not reach their containers on this runtime; undefined when they would. */
export function runtimeCdiProblem(config: Readonly<Record<string, unknown>> | undefined, cdiDir: string): string | undefined {
  if (config === undefined) return undefined // a runtime that does not say: nothing to judge by
  // containerd 1.7 has enable_cdi, off by default; containerd 2 has no switch (always on) and no enableCDI.
  if (config.enableCDI === false) {
    return "the container runtime has CDI off (containerd's enable_cdi = false, 1.7's default), so claims' devices never reach their containers: set enable_cdi = true in containerd's CRI plugin config and restart it, or run containerd 2"
  }
  const dirs = config.cdiSpecDirs
  if (Array.isArray(dirs) && dirs.every((d) => typeof d === 'string') && !dirs.some((d) => samePath(d, cdiDir))) {
    return `the container runtime reads CDI specs from ${dirs.join(', ') || 'no directory'}, not from ${cdiDir} where the agent writes them (--cdi-dir), so claims' devices never reach their containers: add ${cdiDir} to containerd's cdi_spec_dirs, or give the agent one of those as --cdi-dir`
  }
  return undefined
}

const samePath = (a: string, b: string): boolean => a.replace(/\/+$/, '') === b.replace(/\/+$/, '')
