import {spawn} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import {basename, join, posix} from 'node:path'
import {fileURLToPath} from 'node:url'

import {extract} from 'tar-stream'

import {cachedDownload, HttpError} from './cache.js'
import {resolveDebianPackages, type DebianPackage} from './debian-archive.js'
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
 */
export const debianLockPath = fileURLToPath(new URL('debian.lock.json', import.meta.url))

type DebianLock = Record<string, DebianPackage[]>

/**
 * The locked packages of each platform. Missing ones (a new architecture or package) and, with `refresh`,
 * all of them are resolved from the archive's signed indexes and written back to the lock.
 */
export async function lockedDebianPackages(chosen: readonly Platform[], options: {cacheDir: string; log: (line: string) => void; refresh?: boolean}): Promise<Map<Platform, DebianPackage[]>> {
  const lock = await readLock()
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
  if (changed) await writeLock(lock)
  return locked
}

/**
 * The .deb files, from the cache or the archive, each verified against the SHA256 the Packages index gave
 * for it (recorded in the lock). A locked version the archive no longer serves (Debian keeps only the
 * newest in its pool) is replaced by the newest, with a warning: the build still works, and the warning
 * says how to record it.
 */
export async function fetchDebianPackages(
  packages: readonly DebianPackage[],
  platform: Platform,
  options: {cacheDir: string; log: (line: string) => void},
): Promise<Array<DebianPackage & {path: string}>> {
  try {
    return await Promise.all(packages.map((p) => download(p, options)))
  } catch (error) {
    if (!(error instanceof HttpError) || error.status !== 404) throw error
    const newest = await resolveDebianPackages([...debianPackageNames], platform.debian, options)
    options.log(
      `warning: debian: ${error.message}; using ${newest.map((p) => `${p.name} ${p.version}`).join(', ')} (run \`npm run image -- --refresh-debian\` and commit ${basename(debianLockPath)} to lock them)`,
    )
    return Promise.all(newest.map((p) => download(p, options)))
  }
}

async function download(p: DebianPackage, options: {cacheDir: string; log: (line: string) => void}): Promise<DebianPackage & {path: string}> {
  const path = await cachedDownload(`${p.url}/${p.filename}`, join(options.cacheDir, 'debian', basename(p.filename)), {algorithm: 'sha256', hex: p.sha256}, options.log)
  return {...p, path}
}

async function readLock(): Promise<DebianLock> {
  try {
    return JSON.parse(await readFile(debianLockPath, 'utf8')) as DebianLock
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw error
  }
}

async function writeLock(lock: DebianLock): Promise<void> {
  const ordered = Object.fromEntries(
    Object.keys(lock)
      .sort()
      .map((arch) => [
        arch,
        lock[arch]!.map((p) => ({name: p.name, version: p.version, architecture: p.architecture, suite: p.suite, url: p.url, filename: p.filename, sha256: p.sha256, size: p.size})),
      ]),
  )
  await writeFile(debianLockPath, JSON.stringify(ordered, null, 2) + '\n')
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
