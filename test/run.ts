// The test runs on several Kubernetes releases, each mocha run in its own network namespace, and one closing
// line for them all (`N passed, N failed, N skipped`).
//
//   tsx test/run.ts                     every suite on the newest release of harness/controlplane/kube-versions,
//                                       then the version-dependent suites (.mocharc.cjs part `versions`) on the oldest
//   tsx test/run.ts --versions [v...]   the version-dependent suites on each release named (default: all of them)
//
// A release's binaries are built (or found cached) before its run, outside the namespace, where the Go module
// proxy can be reached; a release that cannot be built fails its run, named, and the others still run.
import {spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {buildScript, kubeVersions} from '../harness/controlplane/paths.js'

interface Tally {
  passed: number
  failed: number
  skipped: number
}
interface Run {
  readonly what: string
  readonly version: string
  readonly part?: 'versions'
}

const usage = 'usage: tsx test/run.ts [--versions [v1.X.Y ...]]'
const [flag, ...named] = process.argv.slice(2)
if (flag !== undefined && flag !== '--versions') fail(`unknown argument ${flag}; ${usage}`)
const unknown = named.filter((v) => !kubeVersions.includes(v))
if (unknown.length > 0) fail(`${unknown.join(', ')} is not in harness/controlplane/kube-versions (${kubeVersions.join(', ')}); add it there to test it`)

const oldest = kubeVersions[0] as string
const newest = kubeVersions.at(-1) as string
const runs: Run[] =
  flag === '--versions'
    ? (named.length > 0 ? named : kubeVersions).map((version) => ({part: 'versions', version, what: `version-dependent suites on ${version}`}))
    : [
        {version: newest, what: `every suite on ${newest}`},
        {part: 'versions', version: oldest, what: `version-dependent suites on ${oldest}`},
      ]

const dir = mkdtempSync(join(tmpdir(), 'nfdctl-test-run-'))
const results: Array<Run & Tally & {seconds: number}> = []
for (const run of runs) {
  const started = Date.now()
  process.stdout.write(`\n=== ${run.what}\n`)
  const tallyFile = join(dir, `${results.length}.jsonl`)
  const env = {...process.env, KUBE_VERSION: run.version, NFDCTL_TEST_TALLY: tallyFile, ...(run.part ? {NFDCTL_TEST_PART: run.part} : {})}
  const built = spawnSync('bash', [buildScript, 'node'], {env, stdio: ['ignore', 'ignore', 'inherit']})
  const tally: Tally = {failed: 0, passed: 0, skipped: 0}
  if (built.status !== 0) {
    process.stdout.write(`${run.version}: the binaries could not be built (${buildScript} exited with ${built.status}); its run counts as one failure\n`)
    tally.failed = 1
  } else {
    const mocha = spawnSync('tsx', ['harness/node/in-namespace.ts', 'mocha'], {env, stdio: 'inherit'})
    // The reporter writes one line at the run's end; the last is the run's own, whatever else wrote there.
    const lines = readLines(tallyFile)
    if (lines.length > 0) Object.assign(tally, JSON.parse(lines.at(-1) as string) as Tally)
    // A run that ended without its reporter's closing counts (a crash, a signal) or exited non-zero with no
    // failure counted failed as a whole.
    if (lines.length === 0 || (mocha.status !== 0 && tally.failed === 0)) tally.failed += 1
  }
  results.push({...run, ...tally, seconds: Math.round((Date.now() - started) / 1000)})
}
rmSync(dir, {force: true, recursive: true})

const total = results.reduce((sum, r) => ({failed: sum.failed + r.failed, passed: sum.passed + r.passed, skipped: sum.skipped + r.skipped}), {failed: 0, passed: 0, skipped: 0})
process.stdout.write(`\n${results.map((r) => `${r.what}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped (${r.seconds} s)`).join('\n')}\n`)
process.stdout.write(`${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`)
process.exit(total.failed > 0 ? 1 : 0)

function readLines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean)
  } catch {
    return []
  }
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`)
  process.exit(2)
}
