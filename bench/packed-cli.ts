import {execFile} from 'node:child_process'
import {copyFile, mkdtemp, readdir, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {repoRoot} from '../test/controlplane/paths.js'

const run = promisify(execFile)

export interface PackedCli {
  /** The installed package's `bin/run.js`: run it directly, so its shebang (and V8 flags) apply, as npm's bin link does. */
  readonly bin: string
  readonly remove: () => Promise<void>
}

/**
 * The CLI as users get it: `npm pack` (build plus oclif manifest), unpacked, and its production
 * dependencies installed from the lockfile, in a temporary directory. About 15 s.
 */
export async function packCli(log: (line: string) => void): Promise<PackedCli> {
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-packed-'))
  const started = performance.now()
  await run('npm', ['pack', '--silent', '--pack-destination', dir], {cwd: repoRoot})
  const tarball = (await readdir(dir)).find((name) => name.endsWith('.tgz'))
  if (tarball === undefined) throw new Error(`npm pack wrote no tarball into ${dir}`)
  await run('tar', ['xzf', join(dir, tarball), '-C', dir])
  const pkg = join(dir, 'package')
  await copyFile(join(repoRoot, 'package-lock.json'), join(pkg, 'package-lock.json'))
  await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--silent'], {cwd: pkg})
  log(`packed and installed the CLI in ${((performance.now() - started) / 1000).toFixed(1)}s (${pkg})`)
  return {bin: join(pkg, 'bin', 'run.js'), remove: () => rm(dir, {force: true, recursive: true})}
}

/** NODE_OPTIONS that make a benchmarked CLI write its peak RSS to `file` when it exits (report-max-rss.cjs). */
export function rssReportEnv(file: string): Record<string, string> {
  return {NFDCTL_BENCH_RSS_FILE: file, NODE_OPTIONS: `--require ${join(repoRoot, 'bench/report-max-rss.cjs')}`}
}
