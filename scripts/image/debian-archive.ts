import {execFile} from 'node:child_process'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {cachedDownload, fetchText} from './cache.js'
import {compareDebianVersions} from './debian-version.js'

const run = promisify(execFile)

/** One suite of a Debian archive: where its InRelease and pool are. */
export interface DebianSuite {
  readonly url: string
  readonly suite: string
}

/**
 * Debian 12 as this machine's apt names it: the release, its point-release updates and its security
 * updates; a package comes from whichever has the newest version.
 */
export const bookworm: readonly DebianSuite[] = [
  {suite: 'bookworm', url: 'http://deb.debian.org/debian'},
  {suite: 'bookworm-updates', url: 'http://deb.debian.org/debian'},
  {suite: 'bookworm-security', url: 'http://deb.debian.org/debian-security'},
]

/** Debian's archive keys; InRelease files are checked against them before any hash in them is trusted. */
export const debianKeyring = '/usr/share/keyrings/debian-archive-keyring.gpg'

/** A binary package as the index lists it: enough to fetch it from the pool and verify it. */
export interface DebianPackage {
  readonly name: string
  readonly version: string
  readonly architecture: string
  /** The archive it is in (`http://deb.debian.org/debian-security`) and the suite that listed it. */
  readonly url: string
  readonly suite: string
  /** Its path in the archive: `pool/main/g/glibc/libc6_2.36-9+deb12u13_arm64.deb`. */
  readonly filename: string
  readonly sha256: string
  readonly size: number
}

/**
 * The newest version of each named package for one architecture across the suites, read from their
 * signed indexes: InRelease verified with gpgv against Debian's keyring, the Packages index verified
 * against the SHA256 InRelease lists for it. A name found in no suite throws.
 */
export async function resolveDebianPackages(
  names: readonly string[],
  architecture: string,
  options: {cacheDir: string; log: (line: string) => void; suites?: readonly DebianSuite[]},
): Promise<DebianPackage[]> {
  const found = new Map<string, DebianPackage>()
  for (const suite of options.suites ?? bookworm) {
    const release = await verifiedRelease(suite)
    const indexPath = `main/binary-${architecture}/Packages.xz`
    const listed = releaseFiles(release).get(indexPath)
    if (listed === undefined) throw new Error(`${suite.url} ${suite.suite}: InRelease lists no ${indexPath}`)
    const xz = await cachedDownload(
      `${suite.url}/dists/${suite.suite}/${indexPath}`,
      join(options.cacheDir, 'debian', 'indexes', `${listed.sha256}.xz`),
      {algorithm: 'sha256', hex: listed.sha256},
      options.log,
    )
    const {stdout} = await run('xz', ['-dc', xz], {encoding: 'utf8', maxBuffer: 512 * 1024 * 1024})
    for (const stanza of parsePackages(stdout, new Set(names))) {
      const candidate: DebianPackage = {...stanza, suite: suite.suite, url: suite.url}
      const before = found.get(candidate.name)
      if (before === undefined || compareDebianVersions(candidate.version, before.version) > 0) found.set(candidate.name, candidate)
    }
  }
  const missing = names.filter((name) => !found.has(name))
  if (missing.length > 0) throw new Error(`no ${architecture} package ${missing.join(', ')} in ${(options.suites ?? bookworm).map((s) => s.suite).join(', ')}`)
  return names.map((name) => found.get(name)!)
}

/** The signed part of a suite's InRelease, after gpgv has verified it against Debian's keyring. */
async function verifiedRelease(suite: DebianSuite): Promise<string> {
  const signed = await fetchText(`${suite.url}/dists/${suite.suite}/InRelease`)
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-inrelease-'))
  try {
    await writeFile(join(dir, 'InRelease'), signed)
    const {stdout} = await run('gpgv', ['--keyring', debianKeyring, '--output', '-', join(dir, 'InRelease')], {encoding: 'utf8', maxBuffer: 64 * 1024 * 1024}).catch(
      (error: Error & {stderr?: string}) => {
        throw new Error(`${suite.url} ${suite.suite}: InRelease does not verify against ${debianKeyring} (gpgv and debian-archive-keyring installed?): ${error.stderr?.trim() ?? error.message}`)
      },
    )
    return stdout
  } finally {
    await rm(dir, {force: true, recursive: true})
  }
}

/** The SHA256 section of a Release file: path → sha256 and size. */
export function releaseFiles(release: string): Map<string, {sha256: string; size: number}> {
  const files = new Map<string, {sha256: string; size: number}>()
  let inSha256 = false
  for (const line of release.split('\n')) {
    if (/^\S/.test(line)) inSha256 = line.startsWith('SHA256:')
    else if (inSha256) {
      const [sha256, size, path] = line.trim().split(/\s+/)
      if (sha256 !== undefined && size !== undefined && path !== undefined) files.set(path, {sha256, size: Number(size)})
    }
  }
  return files
}

/** The stanzas of a Packages index whose Package is one of `names`. */
export function parsePackages(index: string, names: ReadonlySet<string>): Array<Omit<DebianPackage, 'suite' | 'url'>> {
  const packages: Array<Omit<DebianPackage, 'suite' | 'url'>> = []
  for (const stanza of index.split('\n\n')) {
    const name = /^Package: (.+)$/m.exec(stanza)?.[1]
    if (name === undefined || !names.has(name)) continue
    const field = (key: string): string => {
      const value = new RegExp(`^${key}: (.+)$`, 'm').exec(stanza)?.[1]
      if (value === undefined) throw new Error(`Packages index: ${name} has no ${key} field`)
      return value
    }
    packages.push({architecture: field('Architecture'), filename: field('Filename'), name, sha256: field('SHA256'), size: Number(field('Size')), version: field('Version')})
  }
  return packages
}
