/** One platform of the image: how the OCI index, Debian, npm and the ELF headers each name it. */
export interface Platform {
  /** GOARCH / OCI `architecture`: amd64, arm64. */
  readonly architecture: 'amd64' | 'arm64'
  /** OCI `variant`, for arm64 only (v8 is the only 64-bit ARM variant). */
  readonly variant?: string
  /** Debian's architecture name, in `binary-<arch>/Packages` and the .deb file names. */
  readonly debian: string
  /** Node's `process.arch`, and the suffix of the `node-linux-*` and `@koromix/koffi-linux-*` packages. */
  readonly node: string
  /** The multiarch directory glibc's loader searches: /lib/<triplet>, /usr/lib/<triplet>. */
  readonly triplet: string
  /** ELF `e_machine`: 62 (EM_X86_64), 183 (EM_AARCH64). */
  readonly elfMachine: number
}

export const platforms: Readonly<Record<Platform['architecture'], Platform>> = {
  amd64: {architecture: 'amd64', debian: 'amd64', elfMachine: 62, node: 'x64', triplet: 'x86_64-linux-gnu'},
  arm64: {architecture: 'arm64', debian: 'arm64', elfMachine: 183, node: 'arm64', triplet: 'aarch64-linux-gnu', variant: 'v8'},
}

export const allArchitectures = Object.keys(platforms) as Array<Platform['architecture']>

/** `linux/amd64`, `linux/arm64/v8`: how the index, `ctr` and `--platform` flags write it. */
export function platformName(platform: Platform): string {
  return ['linux', platform.architecture, platform.variant].filter((part) => part !== undefined).join('/')
}

/** `amd64`, `linux/amd64`, `arm64`, `linux/arm64`, `linux/arm64/v8` → the platform; undefined for anything else. */
export function parsePlatform(text: string): Platform | undefined {
  const parts = text.split('/')
  if (parts.length > 1 && parts[0] !== 'linux') return undefined
  const architecture = parts.length > 1 ? parts[1] : parts[0]
  const platform = platforms[architecture as Platform['architecture']]
  if (platform === undefined || (parts.length > 2 && parts[2] !== platform.variant) || parts.length > 3) return undefined
  return platform
}
