import {execFile} from 'node:child_process'
import {chmod, mkdtemp, readFile} from 'node:fs/promises'
import {rmSync, statSync} from 'node:fs'
import {createRequire} from 'node:module'
import {tmpdir} from 'node:os'
import {dirname, join, parse} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))

export interface InstalledCli {
  /** The package directory: package.json, bin/, dist/, deploy/crds, production node_modules. */
  readonly dir: string
  /** Its entry point, `bin/run.js`, for `new CliProcess(args, cli.bin, as)`. */
  readonly bin: string
}

let installed: Promise<InstalledCli> | undefined

/**
 * The CLI as `npm install` would lay it out — dist/ compiled from the sources, bin/, package.json,
 * deploy/crds and the production dependencies — in a temporary directory every user can read, for tests
 * that run it as another user (nobody): such a user cannot reach a private checkout (mode 0700, as in
 * .ci/run). Built once per test run (about 10 s) and removed when the run exits. The checkout is only read:
 * no dist/ or oclif.manifest.json appears in it, which would change what the in-process tests load.
 */
export function installedCli(): Promise<InstalledCli> {
  installed ??= install()
  return installed
}

async function install(): Promise<InstalledCli> {
  const base = tmpdir()
  assertSearchableByOthers(base)
  const dir = await mkdtemp(join(base, 'nfdctl-installed-'))
  process.once('exit', () => rmSync(dir, {force: true, recursive: true}))
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  await Promise.all([
    run(process.execPath, [tsc, '-p', join(root, 'tsconfig.json'), '--outDir', join(dir, 'dist'), '--declaration', 'false', '--sourceMap', 'false']),
    // One cp for a few thousand small files: far faster than fs.cp.
    productionPackages().then(async (packages) => run('cp', ['-R', '--parents', '-t', dir, 'package.json', 'bin', 'deploy/crds', 'proto', ...packages], {cwd: root})),
  ])
  await run('chmod', ['-R', 'a+rX', dir]) // whatever the umask or the modes in the checkout
  await chmod(dir, 0o755)
  return {bin: join(dir, 'bin', 'run.js'), dir}
}

/** node_modules/… paths of the installed packages `npm install --omit=dev` keeps, from package-lock.json. */
async function productionPackages(): Promise<string[]> {
  const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {packages: Record<string, {dev?: boolean}>}
  const paths = Object.entries(lock.packages)
    .filter(([path, entry]) => path.startsWith('node_modules/') && entry.dev !== true)
    .map(([path]) => path)
  const present = paths.filter((path) => exists(join(root, path))) // optional packages of other platforms are not installed
  // A nested package (a/node_modules/b) is copied with its parent.
  return present.filter((path) => !present.some((other) => other !== path && path.startsWith(`${other}/`)))
}

function exists(path: string): boolean {
  try {
    statSync(path)
    return true
  } catch {
    return false
  }
}

/** Another user reaches `dir` only if it and every directory above it are searchable by others. */
function assertSearchableByOthers(dir: string): void {
  for (let path = dir; ; path = dirname(path)) {
    if ((statSync(path).mode & 0o001) === 0) throw new Error(`${path} is not searchable by other users, so they cannot run the CLI installed under ${dir}; set TMPDIR to a directory they can reach`)
    if (path === parse(path).root) return
  }
}
