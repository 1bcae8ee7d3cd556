import {createHash} from 'node:crypto'
import {mkdir, readFile, rename, writeFile} from 'node:fs/promises'
import {join, posix} from 'node:path'

import type {DebianPackage} from './debian-archive.js'

/**
 * Debian keeps only the newest version of a package in its pool, and snapshot.debian.org (which keeps them
 * all) is not reachable from where nfdctl is built. When a locked .deb is gone and not in the cache, the
 * newest is resolved from the signed indexes and recorded here, in the image cache, under the SHA-256 of the
 * committed lock: `--fetch-only` (outside the tests' network namespace) records, and the build that follows
 * (inside it, offline) reads the record and takes exactly the files `--fetch-only` put in the cache.
 */
export const resolvedFileName = 'debian-resolved.json'

/** One architecture's packages as resolved in place of a lock's: the complete list, in the lock's order. */
export interface ResolvedArchitecture {
  /** When it was resolved, RFC 3339. */
  readonly resolved: string
  readonly packages: readonly DebianPackage[]
}

/** The cache-side record: lock SHA-256 → Debian architecture → what replaced the lock's packages. */
export type ResolvedFile = Readonly<Record<string, Readonly<Record<string, ResolvedArchitecture>>>>

/** One locked package and what a build uses in its place. */
export interface Substitution {
  readonly name: string
  readonly architecture: string
  readonly locked: string
  readonly used: string
}

/** The key of a lock's record: the SHA-256 of the lock file's bytes. */
export function lockDigest(lockText: string | Buffer): string {
  return createHash('sha256').update(lockText).digest('hex')
}

/**
 * What the record holds for this lock and architecture, or undefined. A record whose package names differ
 * from the lock's does not describe this lock's packages and is ignored.
 */
export function recordedPackages(file: ResolvedFile, lockSha256: string, architecture: string, locked: readonly DebianPackage[]): ResolvedArchitecture | undefined {
  const record = file[lockSha256]?.[architecture]
  if (record === undefined) return undefined
  const names = (list: readonly DebianPackage[]): string => list.map((p) => p.name).join(' ')
  return names(record.packages) === names(locked) ? record : undefined
}

/**
 * `current` with each gone package, and every package built from the same source (the same pool
 * directory: libstdc++6, libgcc-s1, libatomic1 and gcc-12-base come from gcc-12 together), replaced by
 * its version in `newest`. The rest keep their versions, so a build differs from the lock only where the
 * archive forces it.
 */
export function replaceGone(current: readonly DebianPackage[], newest: readonly DebianPackage[], gone: ReadonlySet<string>): DebianPackage[] {
  const source = (p: DebianPackage): string => posix.dirname(p.filename)
  const goneSources = new Set(current.filter((p) => gone.has(p.name)).map(source))
  return current.map((p) => {
    if (!gone.has(p.name) && !goneSources.has(source(p))) return p
    const replacement = newest.find((n) => n.name === p.name)
    if (replacement === undefined) throw new Error(`debian: ${p.name} ${p.version} (${p.architecture}) is gone from ${p.url} and the indexes list no other version`)
    return replacement
  })
}

/** The packages `used` holds at another version than `locked`. */
export function substitutions(architecture: string, locked: readonly DebianPackage[], used: readonly DebianPackage[]): Substitution[] {
  return used.flatMap((p) => {
    const before = locked.find((l) => l.name === p.name)
    return before !== undefined && before.version !== p.version ? [{architecture, locked: before.version, name: p.name, used: p.version}] : []
  })
}

/** `libc6 2.36-9+deb12u14 → 2.36-9+deb12u15 (amd64, arm64), …`: one item per change, its architectures together. */
export function describeSubstitutions(list: readonly Substitution[]): string {
  const grouped = new Map<string, string[]>()
  for (const s of list) {
    const key = `${s.name} ${s.locked} → ${s.used}`
    grouped.set(key, [...(grouped.get(key) ?? []), s.architecture])
  }
  return [...grouped].map(([change, architectures]) => `${change} (${architectures.join(', ')})`).join(', ')
}

/** `file` with one architecture's record of one lock set; other locks and architectures are kept. */
export function withRecord(file: ResolvedFile, lockSha256: string, architecture: string, record: ResolvedArchitecture): ResolvedFile {
  // The lock's field order, so the record reads like the lock it stands in for.
  const packages = record.packages.map(({architecture, filename, name, sha256, size, suite, url, version}) => ({name, version, architecture, suite, url, filename, sha256, size}))
  return {...file, [lockSha256]: {...file[lockSha256], [architecture]: {resolved: record.resolved, packages}}}
}

export function resolvedPath(cacheDir: string): string {
  return join(cacheDir, resolvedFileName)
}

export async function readResolved(cacheDir: string): Promise<ResolvedFile> {
  try {
    return JSON.parse(await readFile(resolvedPath(cacheDir), 'utf8')) as ResolvedFile
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new Error(`${resolvedPath(cacheDir)}: ${(error as Error).message} (delete it; npm run image -- --fetch-only records it again)`)
  }
}

/** Written beside and renamed, so a build never reads half a record. */
export async function writeResolved(cacheDir: string, file: ResolvedFile): Promise<void> {
  await mkdir(cacheDir, {recursive: true})
  const partial = `${resolvedPath(cacheDir)}.${process.pid}.partial`
  await writeFile(partial, `${JSON.stringify(file, null, 2)}\n`)
  await rename(partial, resolvedPath(cacheDir))
}
