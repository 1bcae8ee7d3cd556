import {spawn} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import {basename, join, posix} from 'node:path'
import {fileURLToPath} from 'node:url'

import {extract} from 'tar-stream'

import {cachedDownload, HttpError} from './cache.js'
import {resolveDebianPackages, type DebianPackage} from './debian-archive.js'
import {describeSubstitutions, lockDigest, readResolved, recordedPackages, replaceGone, resolvedPath, type Substitution, substitutions, withRecord, writeResolved} from './debian-resolved.js'
import {readElf} from './elf.js'
import type {LayerEntry} from './layer.js'
import type {Platform} from './platforms.js'

/**
 * The Debian 12 packages the base layer's files come from: glibc and GCC's runtime libraries (what the
 * official Node binary and koffi's native module link against), and gcc-12-base, where the GCC runtime
 * packages keep their copyright file.
 */
export const debianPackageNames = ['libc6', 'libstdc++6', 'libgcc-s1', 'libatomic1', 'gcc-12-base'] as const

/**
 * The exact packages a build uses, per architecture, committed beside this file: the same commit builds
 * from the same .debs. `--refresh-debian` resolves them again from the signed indexes and rewrites it.
 * Where a locked version is gone from the archive's pool, the image cache's record (debian-resolved.ts) says
 * what replaces it.
 */
export const debianLockPath = fileURLToPath(new URL('debian.lock.json', import.meta.url))

type DebianLock = Record<string, DebianPackage[]>

/** The committed lock as a build reads it. */
export interface DebianSelection {
  /** The SHA-256 of debian.lock.json's bytes: what the cache-side record of replaced packages is keyed by. */
  readonly lockSha256: string
  /** Per platform, the packages the lock names. */
  readonly locked: ReadonlyMap<Platform, readonly DebianPackage[]>
}

/**
 * The locked packages of each platform, from `lockPath` (the lock of the commit being built; default the
 * checkout's). Missing ones (a new architecture or package) and, with `refresh`, all of them are resolved
 * from the archive's signed indexes and written back to the checkout's lock.
 */
export async function lockedDebianPackages(chosen: readonly Platform[], options: {cacheDir: string; log: (line: string) => void; refresh?: boolean; lockPath?: string}): Promise<DebianSelection> {
  const read = await readLock(options.lockPath ?? debianLockPath)
  const lock = read.lock
  let text = read.text
  const names = [...debianPackageNames]
  const locked = new Map<Platform, DebianPackage[]>()
  let changed = false
  for (const platform of chosen) {
    let packages = lock[platform.debian]
    if (options.refresh || packages === undefined || names.some((name) => !packages!.some((p) => p.name === name))) {
      packages = await resolveDebianPackages(names, platform.debian, options)
      lock[platform.debian] = packages
      changed = true
      options.log(`debian: locked ${platform.debian} ${packages.map((p) => `${p.name} ${p.version}`).join(', ')}`)
    }
    locked.set(platform, packages)
  }
  if (changed) text = await writeLock(lock)
  return {locked, lockSha256: lockDigest(text)}
}

type Resolver = (names: readonly string[], architecture: string) => Promise<DebianPackage[]>

/**
 * The .deb files, from the cache or the archive, each verified against the SHA256 the Packages index gave
 * for it. A build uses the locked packages unless the image cache records a replacement for this lock
 * (debian-resolved.ts); a locked version gone from the archive's pool and absent from the cache is
 * replaced by the newest (with the others of its source package) and recorded there, so the offline build
 * after `--fetch-only` uses exactly what `--fetch-only` downloaded. Any replacement is one warning line.
 */
export async function fetchDebianPackages(
  selection: DebianSelection,
  options: {cacheDir: string; log: (line: string) => void; resolve?: Resolver},
): Promise<Map<Platform, Array<DebianPackage & {path: string}>>> {
  const resolve: Resolver = options.resolve ?? ((names, architecture) => resolveDebianPackages(names, architecture, options))
  let file = await readResolved(options.cacheDir)
  let recorded = false
  const replaced: Substitution[] = []
  const fetched = new Map<Platform, Array<DebianPackage & {path: string}>>()
  for (const [platform, locked] of selection.locked) {
    let packages = recordedPackages(file, selection.lockSha256, platform.debian, locked)?.packages ?? locked
    const attempts = await Promise.allSettled(packages.map((p) => download(p, options)))
    const gone = new Set<string>()
    for (const [i, attempt] of attempts.entries()) {
      if (attempt.status === 'fulfilled') continue
      if (attempt.reason instanceof HttpError && attempt.reason.status === 404) gone.add(packages[i]!.name)
      else throw attempt.reason
    }
    if (gone.size > 0) {
      packages = replaceGone(
        packages,
        await resolve(
          packages.map((p) => p.name),
          platform.debian,
        ),
        gone,
      )
      file = withRecord(file, selection.lockSha256, platform.debian, {packages, resolved: new Date().toISOString().replace(/\.\d+Z$/, 'Z')})
      recorded = true
    }
    fetched.set(platform, gone.size > 0 ? await Promise.all(packages.map((p) => download(p, options))) : attempts.map((a) => (a as PromiseFulfilledResult<DebianPackage & {path: string}>).value))
    replaced.push(...substitutions(platform.debian, locked, packages))
  }
  if (recorded) await writeResolved(options.cacheDir, file)
  if (replaced.length > 0) {
    options.log(
      `warning: debian: ${describeSubstitutions(replaced)}: the locked versions are gone from the archive's pool; ${recorded ? 'resolved from the signed indexes and recorded' : 'as recorded'} in ${resolvedPath(options.cacheDir)} for every build of this lock, offline ones included. The image differs from ${basename(debianLockPath)} until \`npm run image -- --refresh-debian\` is committed`,
    )
  }
  return fetched
}

async function download(p: DebianPackage, options: {cacheDir: string; log: (line: string) => void}): Promise<DebianPackage & {path: string}> {
  const url = `${p.url}/${p.filename}`
  const dir = join(options.cacheDir, 'debian')
  try {
    return {...p, path: await cachedDownload(url, join(dir, basename(p.filename)), {algorithm: 'sha256', hex: p.sha256}, options.log)}
  } catch (error) {
    // fetch's own failure (no route, no DNS), as inside the tests' network namespace: say where the file comes from.
    if (!(error instanceof TypeError)) throw error
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : ''
    throw new Error(`debian: GET ${url}: ${error.message}${cause}; ${dir} holds no verified copy (npm run image -- --fetch-only downloads it where the network is reachable)`)
  }
}

async function readLock(path: string): Promise<{lock: DebianLock; text: string}> {
  try {
    const text = await readFile(path, 'utf8')
    return {lock: JSON.parse(text) as DebianLock, text}
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {lock: {}, text: ''}
    throw error
  }
}

async function writeLock(lock: DebianLock): Promise<string> {
  const ordered = Object.fromEntries(
    Object.keys(lock)
      .sort()
      .map((arch) => [
        arch,
        lock[arch]!.map((p) => ({name: p.name, version: p.version, architecture: p.architecture, suite: p.suite, url: p.url, filename: p.filename, sha256: p.sha256, size: p.size})),
      ]),
  )
  const text = `${JSON.stringify(ordered, null, 2)}\n`
  await writeFile(debianLockPath, text)
  return text
}

/** One file system entry of a .deb's data, its path without the leading `./`. */
interface DebEntry {
  readonly package: string
  readonly type: 'directory' | 'file' | 'symlink'
  readonly mode: number
  readonly data: Buffer
  readonly linkname: string
  readonly mtime: Date
}

/** Every entry of the packages' data archives (`dpkg-deb --fsys-tarfile`), by path. */
export async function readDebs(debs: ReadonlyArray<{name: string; path: string}>): Promise<Map<string, DebEntry>> {
  const tree = new Map<string, DebEntry>()
  for (const deb of debs) {
    const child = spawn('dpkg-deb', ['--fsys-tarfile', deb.path], {stdio: ['ignore', 'pipe', 'pipe']})
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const exited = new Promise<void>((resolve, reject) => {
      child.once('error', reject)
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`dpkg-deb --fsys-tarfile ${deb.path}: exit ${code}: ${stderr.trim()}`))))
    })
    const reader = extract()
    child.stdout.pipe(reader)
    for await (const entry of reader) {
      const chunks: Buffer[] = []
      for await (const chunk of entry) chunks.push(chunk as Buffer)
      const path = posix
        .normalize(entry.header.name)
        .replace(/^\.?\/*/, '')
        .replace(/\/$/, '')
      const type = entry.header.type
      if (path === '' || path === '.' || (type !== 'directory' && type !== 'file' && type !== 'symlink')) continue
      tree.set(path, {data: Buffer.concat(chunks), linkname: entry.header.linkname ?? '', mode: entry.header.mode & 0o7777, mtime: entry.header.mtime, package: deb.name, type})
    }
    await exited
  }
  return tree
}

/**
 * The base layer for one platform: the dynamic loader and every shared library the given ELF files need,
 * transitively (DT_NEEDED, searched where Debian's loader searches: /lib/<triplet>, /usr/lib/<triplet>),
 * with the symbolic links on the way (the /lib64 loader link, libstdc++.so.6 → libstdc++.so.6.0.30);
 * each contributing package's copyright file; /etc/passwd and /etc/group with the nonroot user 65532, its
 * home, /tmp (1777) and /etc/nsswitch.conf. Nothing else: no shell, no package manager, no coreutils.
 * Package files keep their packages' times; `mtime`, the newest of them, is for the rest.
 */
export function baseLayerEntries(platform: Platform, tree: ReadonlyMap<string, DebEntry>, executables: readonly Buffer[]): {entries: LayerEntry[]; mtime: Date} {
  const included = new Map<string, DebEntry>()
  const resolve = (path: string): string => resolveInTree(tree, path, included)
  const searchDirs = [`lib/${platform.triplet}`, `usr/lib/${platform.triplet}`, 'lib', 'usr/lib']
  const visited = new Set<string>()
  const pending: Array<{soname: string; by: string}> = []
  const need = (elf: Buffer, by: string): void => {
    const info = readElf(elf)
    if (info.machine !== platform.elfMachine) throw new Error(`${by} is for ELF machine ${info.machine}, not ${platform.elfMachine} (${platform.architecture})`)
    if (info.interpreter !== undefined) pending.push({by, soname: info.interpreter})
    for (const soname of info.needed) pending.push({by, soname})
  }
  for (const [i, elf] of executables.entries()) need(elf, `executable ${i + 1}`)
  while (pending.length > 0) {
    const {by, soname} = pending.shift()!
    if (visited.has(soname)) continue
    visited.add(soname)
    const candidates = soname.startsWith('/') ? [soname.slice(1)] : searchDirs.map((dir) => `${dir}/${soname}`)
    const found = candidates.find((path) => pathExists(tree, path))
    if (found === undefined) throw new Error(`${soname} (needed by ${by}) is in none of ${debianPackageNames.join(', ')} for ${platform.debian}`)
    const real = resolve(found)
    need(tree.get(real)!.data, real)
  }
  const packages = new Set([...included.values()].map((entry) => entry.package))
  for (const name of [...packages].sort()) resolve(`usr/share/doc/${name}/copyright`)

  const entries: LayerEntry[] = [...included].map(([path, entry]) =>
    entry.type === 'symlink'
      ? {linkname: entry.linkname, mode: 0o777, mtime: entry.mtime, path, type: 'symlink'}
      : {data: entry.data, mode: entry.mode & 0o111 ? 0o755 : 0o644, mtime: entry.mtime, path, type: 'file'},
  )
  const mtime = new Date(Math.max(...[...included.values()].map((entry) => entry.mtime.getTime())))
  entries.push(
    {data: Buffer.from('root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n'), mode: 0o644, path: 'etc/passwd', type: 'file'},
    {data: Buffer.from('root:x:0:\nnonroot:x:65532:\n'), mode: 0o644, path: 'etc/group', type: 'file'},
    // /etc/hosts (which kubelet mounts) before DNS, as glibc's default order does not.
    {data: Buffer.from('passwd: files\ngroup: files\nhosts: files dns\n'), mode: 0o644, path: 'etc/nsswitch.conf', type: 'file'},
    {gid: 65532, mode: 0o700, path: 'home/nonroot', type: 'directory', uid: 65532},
    {mode: 0o700, path: 'root', type: 'directory'},
    {mode: 0o1777, path: 'tmp', type: 'directory'},
  )
  return {entries, mtime}
}

function pathExists(tree: ReadonlyMap<string, DebEntry>, path: string): boolean {
  try {
    resolveInTree(tree, path, new Map())
    return true
  } catch {
    return false
  }
}

/**
 * The path with every symbolic link on the way followed inside the packages' tree (a link to a directory,
 * as /usr/share/doc/libstdc++6 → gcc-12-base, included), recording each link and the final file in
 * `included`. Returns the final file's path.
 */
function resolveInTree(tree: ReadonlyMap<string, DebEntry>, path: string, included: Map<string, DebEntry>): string {
  let parts = path.split('/')
  for (let hops = 0, i = 0; i < parts.length; ) {
    const prefix = parts.slice(0, i + 1).join('/')
    const entry = tree.get(prefix)
    if (entry === undefined) throw new Error(`${path}: ${prefix} is in no package`)
    if (entry.type === 'symlink') {
      if (++hops > 16) throw new Error(`${path}: too many symbolic links`)
      included.set(prefix, entry)
      const target = entry.linkname.startsWith('/') ? entry.linkname.slice(1) : posix.join(posix.dirname(prefix), entry.linkname)
      parts = [...posix.normalize(target).split('/'), ...parts.slice(i + 1)]
      i = 0
      continue
    }
    if (i === parts.length - 1) {
      if (entry.type !== 'file') throw new Error(`${path} is a ${entry.type}, not a file`)
      included.set(prefix, entry)
      return prefix
    }
    if (entry.type !== 'directory') throw new Error(`${path}: ${prefix} is not a directory`)
    i++
  }
  throw new Error(`${path}: empty path`)
}
