import {readFile} from 'node:fs/promises'

/** What `nfdctl version` reports. */
export interface VersionInfo {
  readonly version: string
  /** The commit the package was built from, or why it is not known. */
  readonly commit: string
  /** The running Node.js, as `process.version` gives it: `v26.12.1`. */
  readonly node: string
  /** OS and architecture as Kubernetes and OCI images name them: `linux/amd64`, `linux/arm64`. */
  readonly platform: string
}

/** What the packed package recorded at pack time (scripts/build-info.mjs writes dist/build-info.json). */
export interface BuildInfo {
  readonly commit: string | null
}

export const sourceCheckoutCommit = 'unknown (source checkout)'
export const unrecordedCommit = 'unknown (not recorded when packed)'

/** dist/build-info.json beside dist/lib/; from the TypeScript sources (src/lib/) there is none. */
const buildInfoUrl = new URL('../build-info.json', import.meta.url)

/**
 * The package's build information; undefined where there is none (the sources run through tsx, or a dist/
 * built by `npm run build` alone). A file that is there but not what the pack step writes throws.
 */
export async function readBuildInfo(url: URL = buildInfoUrl): Promise<BuildInfo | undefined> {
  let text: string
  try {
    text = await readFile(url, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  const parsed = JSON.parse(text) as {commit?: unknown}
  if (parsed.commit !== null && typeof parsed.commit !== 'string') throw new Error(`${url.pathname}: "commit" must be a string or null`)
  return {commit: parsed.commit}
}

/** Node's `process.arch` → the name Kubernetes (GOARCH) and image indexes use; the rest are the same. */
export function kubernetesArchitecture(arch: string): string {
  const renamed: Record<string, string> = {ia32: '386', x64: 'amd64'}
  return renamed[arch] ?? arch
}

export function versionInfo(input: {version: string; buildInfo: BuildInfo | undefined; nodeVersion: string; platform: string; arch: string}): VersionInfo {
  const commit = input.buildInfo === undefined ? sourceCheckoutCommit : (input.buildInfo.commit ?? unrecordedCommit)
  return {commit, node: input.nodeVersion, platform: `${input.platform}/${kubernetesArchitecture(input.arch)}`, version: input.version}
}

/** What `nfdctl version` reports for this process: the package's `version`, its build record, this Node and machine. */
export async function runningVersionInfo(version: string): Promise<VersionInfo> {
  return versionInfo({arch: process.arch, buildInfo: await readBuildInfo(), nodeVersion: process.version, platform: process.platform, version})
}
