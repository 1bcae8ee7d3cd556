import {spawn} from 'node:child_process'
import {copyFile, lstat, mkdir, readdir, readFile, readlink, rm, symlink} from 'node:fs/promises'
import {join} from 'node:path'

import type {LayerEntry} from './layer.js'
import {imageNodePath} from './node-runtime.js'
import type {Platform} from './platforms.js'
import {installedPackages, productionDifferences} from './production-deps.js'

/** Where the CLI's package sits in the image (as `npm install --global` would put it, without npm). */
export const imageAppDir = '/usr/local/lib/nfdctl'

/** One commit of the repository, exported as plain files. */
export interface SourceTree {
  readonly dir: string
  /** Full commit hash. */
  readonly commit: string
  /** Commit time, seconds since the epoch (SOURCE_DATE_EPOCH). */
  readonly commitTime: number
  /** package.json's version at that commit. */
  readonly version: string
  readonly description: string
  readonly license: string
}

/**
 * `git archive` of the commit into `dir`: the image holds what was committed, never uncommitted work
 * (the working tree is shared with editors and other builds).
 */
export async function exportCommit(repo: string, rev: string, dir: string): Promise<SourceTree> {
  const commit = (await output('git', ['-C', repo, 'rev-parse', '--verify', `${rev}^{commit}`])).trim()
  const commitTime = Number((await output('git', ['-C', repo, 'log', '-1', '--format=%ct', commit])).trim())
  await mkdir(dir, {recursive: true})
  const archive = spawn('git', ['-C', repo, 'archive', '--format=tar', commit], {stdio: ['ignore', 'pipe', 'inherit']})
  const untar = spawn('tar', ['-x', '-C', dir], {stdio: ['pipe', 'inherit', 'inherit']})
  archive.stdout.pipe(untar.stdin)
  await Promise.all([exited(archive, 'git archive'), exited(untar, 'tar -x')])
  const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {version: string; description?: string; license?: string}
  return {commit, commitTime, description: pkg.description ?? '', dir, license: pkg.license ?? '', version: pkg.version}
}

/**
 * `npm pack` of the exported tree: its prepack compiles dist/, writes the oclif manifest and
 * dist/build-info.json (the commit, given here as NFDCTL_COMMIT: an export has no .git), and bundles dist/
 * (scripts/bundle.mjs). The build tools
 * come from the repository's own node_modules, linked in. Returns the tarball's path.
 */
export async function packCli(source: SourceTree, repo: string, destination: string, log: (line: string) => void): Promise<string> {
  await symlink(join(repo, 'node_modules'), join(source.dir, 'node_modules'))
  await command('npm', ['pack', '--pack-destination', destination, '--loglevel=warn'], {
    cwd: source.dir,
    env: {...process.env, NFDCTL_COMMIT: source.commit, SOURCE_DATE_EPOCH: String(source.commitTime)},
    log,
  })
  await rm(join(source.dir, 'node_modules'))
  return join(destination, `nfdctl-${source.version}.tgz`)
}

/**
 * The packed CLI unpacked into `dir` with its production dependencies for one platform, installed from the
 * commit's package-lock.json (`npm ci`, no install scripts, optional packages chosen for Linux, this CPU and
 * glibc), then checked against the lockfile. koffi's prebuilt module keeps only glibc's build for this CPU;
 * npm's hidden lockfile and the .bin links (no shell runs them) go.
 */
export async function installCli(tarball: string, source: SourceTree, platform: Platform, dir: string, log: (line: string) => void): Promise<string> {
  await mkdir(dir, {recursive: true})
  await command('tar', ['-xzf', tarball, '-C', dir, '--no-same-owner'], {log})
  const app = join(dir, 'package')
  await copyFile(join(source.dir, 'package-lock.json'), join(app, 'package-lock.json'))
  // --prefer-offline: packages already in npm's cache are taken from it (their integrity still checked)
  // without asking the registry again, so a build with a warm cache needs no network (tests build inside
  // a network namespace with no route out).
  await command('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--os=linux', `--cpu=${platform.node}`, '--libc=glibc'], {
    cwd: app,
    log: (line) => log(`${platform.architecture}: ${line}`),
  })
  const lock = JSON.parse(await readFile(join(app, 'package-lock.json'), 'utf8')) as {packages: Record<string, object>}
  const differences = productionDifferences(lock.packages, await installedPackages(app), platform)
  if (differences.length > 0) throw new Error(`production dependencies for ${platform.architecture} differ from package-lock.json: ${differences.join('; ')}`)
  const native = join(app, 'node_modules', '@koromix', `koffi-linux-${platform.node}`)
  for (const name of await readdir(native)) if (/^(linux|musl)_/.test(name) && name !== `linux_${platform.node}`) await rm(join(native, name), {force: true, recursive: true})
  for (const path of ['package-lock.json', 'node_modules/.package-lock.json', 'node_modules/.bin']) await rm(join(app, path), {force: true, recursive: true})
  return app
}

/**
 * Puts the lockfile's platform-specific production packages for each platform (koffi's native module) into
 * npm's cache; `npm ci` on the build machine holds only its own platform's.
 */
export async function cachePlatformPackages(repo: string, chosen: readonly Platform[], log: (line: string) => void): Promise<void> {
  const lock = JSON.parse(await readFile(join(repo, 'package-lock.json'), 'utf8')) as {packages: Record<string, {version?: string; dev?: boolean; os?: string[]; cpu?: string[]}>}
  const specs = Object.entries(lock.packages)
    .filter(([, entry]) => entry.dev !== true && entry.cpu !== undefined && (entry.os?.includes('linux') ?? true) && chosen.some((p) => entry.cpu!.includes(p.node)))
    .map(([path, entry]) => `${path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)}@${entry.version}`)
  if (specs.length === 0) return
  log(`npm cache add ${specs.join(' ')}`)
  await command('npm', ['cache', 'add', ...specs], {log})
}

/**
 * The installed CLI as two layers: everything but koffi's native package (the same bytes on every platform,
 * so one blob serves both), and the native package of this platform.
 */
export async function appLayerEntries(app: string): Promise<{shared: LayerEntry[]; native: LayerEntry[]}> {
  const shared: LayerEntry[] = []
  const native: LayerEntry[] = []
  const prefix = imageAppDir.slice(1)
  const walk = async (relative: string): Promise<void> => {
    for (const name of (await readdir(join(app, relative))).sort()) {
      const path = relative === '' ? name : `${relative}/${name}`
      const full = join(app, path)
      const stat = await lstat(full)
      const into = path.startsWith('node_modules/@koromix/') ? native : shared
      if (stat.isDirectory()) {
        into.push({mode: 0o755, path: `${prefix}/${path}`, type: 'directory'})
        await walk(path)
      } else if (stat.isSymbolicLink()) into.push({linkname: await readlink(full), mode: 0o777, path: `${prefix}/${path}`, type: 'symlink'})
      else if (stat.isFile()) into.push({data: () => readFile(full), mode: stat.mode & 0o111 ? 0o755 : 0o644, path: `${prefix}/${path}`, type: 'file'})
      else throw new Error(`${full}: not a file, directory or symbolic link`)
    }
  }
  await walk('')
  return {native, shared}
}

/**
 * The image's entry point: the runtime with the Node flags of bin/run.js's `#!` line (no /usr/bin/env in
 * the image to read them), then bin/run.js.
 */
export async function cliEntrypoint(app: string): Promise<string[]> {
  const firstLine = (await readFile(join(app, 'bin', 'run.js'), 'utf8')).split('\n', 1)[0]!
  const match = /^#!\/usr\/bin\/env -S node(?<flags>( \S+)*)\s*$/.exec(firstLine) ?? /^#!\/usr\/bin\/env node(?<flags>)\s*$/.exec(firstLine)
  if (match === null) throw new Error(`bin/run.js starts with "${firstLine}", not "#!/usr/bin/env [-S] node ..."`)
  const flags = match
    .groups!.flags!.trim()
    .split(' ')
    .filter((flag) => flag !== '')
  return [imageNodePath, ...flags, `${imageAppDir}/bin/run.js`]
}

async function output(file: string, args: readonly string[]): Promise<string> {
  let stdout = ''
  const child = spawn(file, args, {stdio: ['ignore', 'pipe', 'inherit']})
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  await exited(child, `${file} ${args.join(' ')}`)
  return stdout
}

/** Runs a command with its output passed on line by line as progress; a non-zero exit throws. */
export async function command(file: string, args: readonly string[], options: {cwd?: string; env?: NodeJS.ProcessEnv; log: (line: string) => void}): Promise<void> {
  const child = spawn(file, args, {cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe']})
  const tail: string[] = []
  for (const stream of [child.stdout, child.stderr]) {
    let partial = ''
    stream.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n')
      partial = lines.pop()!
      for (const line of lines) {
        if (line.trim() === '') continue
        options.log(line)
        tail.push(line)
        if (tail.length > 20) tail.shift()
      }
    })
  }
  await exited(child, `${file} ${args.join(' ')}`).catch((error: Error) => {
    throw new Error(`${error.message}; its last lines:\n${tail.join('\n')}`)
  })
}

function exited(child: ReturnType<typeof spawn>, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    child.once('error', (error) => reject(new Error(`${what}: ${error.message}`)))
    child.once('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${what} exited with ${signal ?? code}`))))
  })
}
