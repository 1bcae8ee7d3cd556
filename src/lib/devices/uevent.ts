/** A kernel uevent: `ACTION@DEVPATH` then NUL-separated `KEY=VALUE` variables. */
export interface Uevent {
  readonly action: string
  readonly devPath: string
  readonly subsystem?: string
  readonly seqnum?: number
  readonly env: Readonly<Record<string, string>>
}

/**
 * Parses one netlink datagram of the kernel group. Returns undefined for anything that is not a kernel
 * uevent (udevd's `libudev` messages, garbage). Pure.
 */
export function parseUevent(datagram: Buffer): Uevent | undefined {
  const parts = datagram.toString('utf8').split('\0')
  const header = parts[0]
  const at = header.indexOf('@')
  if (at <= 0 || header.startsWith('libudev')) return undefined
  const env: Record<string, string> = {}
  for (const part of parts.slice(1)) {
    const eq = part.indexOf('=')
    if (eq > 0) env[part.slice(0, eq)] = part.slice(eq + 1)
  }
  const seqnum = env.SEQNUM === undefined ? undefined : Number(env.SEQNUM)
  return {
    action: env.ACTION ?? header.slice(0, at),
    devPath: env.DEVPATH ?? header.slice(at + 1),
    env,
    seqnum: Number.isFinite(seqnum) ? seqnum : undefined,
    subsystem: env.SUBSYSTEM,
  }
}

/** The device a uevent is about, when it names a device node (MAJOR, MINOR and DEVNAME set). */
export function deviceKeyOf(event: Uevent): {type: 'block' | 'char'; major: number; minor: number; devName: string} | undefined {
  const {DEVNAME, MAJOR, MINOR} = event.env
  if (DEVNAME === undefined || MAJOR === undefined || MINOR === undefined) return undefined
  return {devName: DEVNAME, major: Number(MAJOR), minor: Number(MINOR), type: event.subsystem === 'block' ? 'block' : 'char'}
}
