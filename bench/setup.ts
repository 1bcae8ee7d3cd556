// What a benchmark runs against: the CLI as users install it, a private control plane, and the CLI's
// `gc once` and `gc run` processes as an operator starts them; for the device benchmarks, a real node.
import {execFile, spawn} from 'node:child_process'
import {copyFile, mkdtemp, readdir, readFile, rm} from 'node:fs/promises'
import {readFileSync} from 'node:fs'
import {availableParallelism, tmpdir} from 'node:os'
import {join} from 'node:path'
import {createInterface} from 'node:readline'
import {promisify} from 'node:util'

import {build} from 'esbuild'

import type {SweepReport} from '../src/lib/gc/sweep-report.js'
import type {KubeClient} from '../src/lib/kube/kube-client.js'
import {ControlPlane} from '../harness/controlplane/control-plane.js'
import {imageCacheDir} from '../scripts/image/cache.js'
import {imageNodeVersion, installImageNodeHere} from '../scripts/image/node-runtime.js'
import {ensureBinaries, repoRoot} from '../harness/controlplane/paths.js'
import {ensureNamespace} from '../harness/controlplane/seed.js'
import {nodeIp} from '../harness/node/netns.js'
import {TestNode} from '../harness/node/node.js'
import {waitFor} from '../harness/process/wait.js'

const run = promisify(execFile)

export interface BenchEnvironment {
  /** The installed package's `bin/run.js`: run directly, so its shebang (and V8 flags) apply, as npm's bin link does. */
  readonly bin: string
  readonly plane: ControlPlane
  /** An admin client of the plane, the `nfd` namespace already made. */
  readonly client: KubeClient
  /** A temporary directory for the benchmark's own files; removed by close(). */
  readonly dir: string
  readonly close: () => Promise<void>
}

/** Which CPUs the control plane and the clients (this process and every process it starts) run on. */
export interface CpuLayout {
  readonly server: string
  readonly clients: string
}

/**
 * The server on all CPUs but the last, the clients on the last, as in a cluster, where an operator's CLI
 * does not run on the API server's cores; undefined below two CPUs.
 */
export function splitCpus(): CpuLayout | undefined {
  const cpus = availableParallelism()
  if (cpus < 2) return undefined
  return {clients: String(cpus - 1), server: cpus === 2 ? '0' : `0-${cpus - 2}`}
}

export interface BenchOptions {
  /** Pins the control plane and the clients apart. */
  readonly cpus?: CpuLayout
  readonly apiserverFlags?: readonly string[]
}

/** The packed CLI, a private control plane and a client of it, all removed by close(). */
export async function startBench(log: (line: string) => void, {apiserverFlags, cpus}: BenchOptions = {}): Promise<BenchEnvironment> {
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-bench-'))
  const bin = await packCli(dir, log)
  if (cpus !== undefined) {
    // Every thread of this process; the processes it starts (the CLI, the fresh loop) inherit it.
    await run('taskset', ['--all-tasks', '--cpu-list', '--pid', cpus.clients, String(process.pid)])
    log(`CPUs: control plane on ${cpus.server}, clients on ${cpus.clients}`)
  }
  const plane = await ControlPlane.start({apiserverFlags, binDir: await ensureBinaries(log), cpus: cpus?.server, dir: join(dir, 'controlplane'), log})
  const client = await plane.client()
  await ensureNamespace(client, 'nfd')
  const close = async (): Promise<void> => {
    client.close()
    await plane.stop()
    await rm(dir, {force: true, recursive: true})
  }
  return {bin, client, close, dir, plane}
}

export interface NodeBenchEnvironment extends BenchEnvironment {
  readonly node: TestNode
  /** Where containerd, kubelet and the control plane's binaries are (for a further node). */
  readonly binDir: string
}

export interface NodeBenchOptions {
  /**
   * kube-scheduler and kube-controller-manager beside the API server, as in a cluster: pods placed by the
   * scheduler (it allocates ResourceClaims), claims made from ResourceClaimTemplates, namespaces' `default`
   * ServiceAccounts. Off by default: they take CPU the other device benchmarks measure the agent with.
   */
  readonly controllers?: boolean
}

/**
 * The packed CLI, a private control plane and a real node (containerd + kubelet) on it; close() stops the
 * node first and puts the host back. Must run inside a test network namespace (harness/node/in-namespace.ts).
 */
export async function startNodeBench(log: (line: string) => void, {controllers = false}: NodeBenchOptions = {}): Promise<NodeBenchEnvironment> {
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-bench-'))
  const bin = await packCli(dir, log)
  const binDir = await ensureBinaries(log, controllers ? ['containerd', 'kubelet', 'kube-scheduler', 'kube-controller-manager'] : ['containerd', 'kubelet'])
  const plane = await ControlPlane.start({
    apiserverFlags: ['--kubelet-preferred-address-types=InternalIP'],
    binDir,
    cluster: controllers ? {nodeIp} : undefined,
    dir: join(dir, 'controlplane'),
    log,
  })
  const client = await plane.client()
  let node: TestNode
  try {
    node = await TestNode.start({binDir, dir: join(dir, 'node'), kubeconfig: plane.kubeconfig, kubernetesService: controllers, log, nodeName: 'nfdctl-bench'}, client)
  } catch (error) {
    client.close()
    await plane.stop()
    throw error
  }
  const close = async (): Promise<void> => {
    await node.stop()
    client.close()
    await plane.stop()
    await rm(dir, {force: true, recursive: true})
  }
  return {bin, binDir, client, close, dir, node, plane}
}

/**
 * The CLI as users get it: `npm pack` (build, oclif manifest, bundle), unpacked, and its production
 * dependencies installed from the lockfile. About 15 s. Returns its `bin/run.js`.
 */
async function packCli(dir: string, log: (line: string) => void): Promise<string> {
  const started = performance.now()
  await run('npm', ['pack', '--silent', '--pack-destination', dir], {cwd: repoRoot})
  const tarball = (await readdir(dir)).find((name) => name.endsWith('.tgz'))
  if (tarball === undefined) throw new Error(`npm pack wrote no tarball into ${dir}`)
  await run('tar', ['xzf', join(dir, tarball), '-C', dir])
  const pkg = join(dir, 'package')
  await copyFile(join(repoRoot, 'package-lock.json'), join(pkg, 'package-lock.json'))
  // From npm's cache: the device benchmarks run in a network namespace with no way out.
  await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--silent', '--prefer-offline'], {cwd: pkg})
  log(`packed and installed the CLI in ${((performance.now() - started) / 1000).toFixed(1)}s (${pkg})`)
  return join(pkg, 'bin', 'run.js')
}

export interface GcOnceRun {
  readonly seconds: number
  readonly report: SweepReport
  /** Peak RSS of the process, in bytes (written by report-process.cjs as it exits). */
  readonly peakRss: number
  /** CPU time the process used, user + system, in seconds. */
  readonly cpuSeconds: number
  readonly phases: ProcessPhases
}

/** When the process (as report-process.cjs saw it from inside) reached each point, in ms since it started. */
export interface ProcessPhases {
  readonly firstRequestMs: number
  readonly firstDeleteMs: number
  readonly lastAnswerMs: number
  readonly exitMs: number
}

const reportPreload = join(repoRoot, 'bench/report-process.cjs')

async function readProcessReport(file: string): Promise<{peakRss: number; cpuSeconds: number; phases: ProcessPhases}> {
  const [rss, cpu, firstRequestMs, firstDeleteMs, lastAnswerMs, exitMs] = (await readFile(file, 'utf8')).split(' ').map(Number)
  return {cpuSeconds: cpu! / 1e6, peakRss: rss!, phases: {exitMs: exitMs!, firstDeleteMs: firstDeleteMs!, firstRequestMs: firstRequestMs!, lastAnswerMs: lastAnswerMs!}}
}

/** `gc once --json` to its end, timed as a whole process; it must delete exactly `expectDeleted` objects. */
export async function runGcOnce(env: BenchEnvironment, args: readonly string[], expectDeleted: number): Promise<GcOnceRun> {
  const rssFile = join(env.dir, `rss-${Date.now()}`)
  const started = performance.now()
  const {code, stdout} = await runToEnd(env.bin, ['gc', 'once', '--json', '--kubeconfig', env.plane.kubeconfig, ...args], {
    NFDCTL_BENCH_RSS_FILE: rssFile,
    NODE_OPTIONS: [process.env.NODE_OPTIONS, `--require ${reportPreload}`].filter(Boolean).join(' '),
  })
  const seconds = (performance.now() - started) / 1000
  if (code !== 0) throw new Error(`gc once exited ${code}: ${stdout.slice(0, 500)}`)
  const report = JSON.parse(stdout) as SweepReport
  const deleted = report.kinds.reduce((n, k) => n + k.deleted, 0)
  if (deleted !== expectDeleted) throw new Error(`gc once deleted ${deleted} objects, expected ${expectDeleted}`)
  return {...(await readProcessReport(rssFile)), report, seconds}
}

export interface FreshLoopRun {
  /** The whole process, timed as runGcOnce times `gc once`. */
  readonly seconds: number
  readonly cpuSeconds: number
  readonly phases: ProcessPhases
}

/** The Node flags on the `#!` line of an installed package's `bin/run.js`. */
export function shebangFlags(bin: string): string[] {
  return readFileSync(bin, 'utf8')
    .split('\n', 1)[0]!
    .split(' ')
    .filter((word) => word.startsWith('--'))
}

/**
 * bench:gc's plain DELETE loop (64 in flight) in a fresh process: the CLI's own client bundled into one
 * file as the package's bundle is (minified ES module, the same externals), Node started with the flags of
 * the CLI's `#!` line, the loop setting the V8 settings a command sets (holdMemoryDown).
 */
export async function runFreshDeleteLoop(env: BenchEnvironment, paths: readonly string[]): Promise<FreshLoopRun> {
  const flags = shebangFlags(env.bin)
  const loop = await freshDeleteLoopIn(env.dir)
  const reportFile = join(env.dir, `fresh-${Date.now()}`)
  const started = performance.now()
  const {code} = await runToEnd('node', [...flags, '--require', reportPreload, loop, env.plane.kubeconfig], {NFDCTL_BENCH_RSS_FILE: reportFile}, paths.join('\n'))
  if (code !== 0) throw new Error(`the fresh DELETE loop exited ${code}`)
  const {cpuSeconds, phases} = await readProcessReport(reportFile)
  return {cpuSeconds, phases, seconds: (performance.now() - started) / 1000}
}

/** The fresh loop's bundle in a benchmark's directory, built on its first run there (every round runs it). */
const freshDeleteLoops = new Map<string, Promise<string>>()
function freshDeleteLoopIn(dir: string): Promise<string> {
  let built = freshDeleteLoops.get(dir)
  if (built === undefined) {
    built = buildFreshDeleteLoop(join(dir, 'fresh-delete-loop.mjs'))
    freshDeleteLoops.set(dir, built)
  }
  return built
}

async function buildFreshDeleteLoop(loop: string): Promise<string> {
  await build({
    banner: {js: "import {createRequire} from 'node:module'; const require = createRequire(import.meta.url);"},
    bundle: true,
    entryPoints: [join(repoRoot, 'bench/fresh-delete-loop.ts')],
    format: 'esm',
    logLevel: 'warning',
    minify: true,
    outfile: loop,
    platform: 'node',
    // As scripts/bundle.mjs does: yaml goes into the bundle, still evaluated on first use.
    plugins: [
      {
        name: 'yaml-in-bundle',
        setup(on) {
          on.onLoad({filter: /src\/lib\/yaml\.ts$/}, async (args) => ({
            contents: (await readFile(args.path, 'utf8')).replace("createRequire(import.meta.url)('yaml')", "require('yaml')"),
            loader: 'ts',
          }))
        },
      },
    ],
    target: 'node20',
  })
  return loop
}

/** Runs a command to its end, its stdout collected; `input`, when given, is its whole stdin. */
function runToEnd(command: string, args: string[], env: Record<string, string>, input?: string): Promise<{code: number | null; stdout: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {env: {...process.env, ...env}, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'inherit']})
    let stdout = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout}))
    if (input !== undefined) child.stdin!.end(input)
  })
}

export interface GcRunProcess {
  readonly pid: number
  /** Stops it with SIGTERM; throws unless it exits 0. */
  readonly stop: () => Promise<void>
}

/** `gc run` as the benchmarks start it: deletes at once, no periodic sweep meanwhile, JSON logs, no metrics port. */
export function gcRunArgs(kubeconfig: string): string[] {
  return ['gc', 'run', '--kubeconfig', kubeconfig, '--grace-period', '0', '--interval', '1h', '--metrics-port', '0', '--log-format', 'json']
}

/** Upstream nfd-gc's arguments as its Deployment runs it: node informer, a full sweep at start, 1 h period. */
export function upstreamGcArgs(kubeconfig: string): string[] {
  return ['-kubeconfig', kubeconfig, '-gc-interval', '1h', '-port', '0']
}

/** `gc run --grace-period 0 --interval 1h` with JSON logs, resolved once its first sweep is done. */
export async function startGcRun(env: BenchEnvironment, timeoutMs: number): Promise<GcRunProcess> {
  const child = spawn(env.bin, gcRunArgs(env.plane.kubeconfig), {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const messages: string[] = []
  createInterface({input: child.stdout}).on('line', (line) => messages.push((JSON.parse(line) as {msg: string}).msg))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  await waitFor('the first sweep of gc run', async () => messages.includes('sweep done'), {intervalMs: 50, timeoutMs})
  return {
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM')
      const code = await exited
      if (code !== 0) throw new Error(`gc run exited ${code} on SIGTERM`)
    },
  }
}

/**
 * --image-node: every process the benchmark starts from here on finds the image's Node first on PATH, so the
 * CLI runs as in the image (its daemons started again with their flags, src/cli/daemon-node-flags.ts);
 * otherwise the `node` on PATH, the oldest Node the CLI supports. Returns which Node the CLI runs under.
 */
export async function useNodeOfImage(imageNode: boolean, dir: string, log: (line: string) => void): Promise<string> {
  if (!imageNode) return `node on PATH, ${process.version}`
  const bin = join(dir, 'image-node', 'bin')
  if ((await installImageNodeHere(bin, {cacheDir: imageCacheDir(), log})) === undefined) throw new Error(`--image-node: the image has no Node for ${process.arch}`)
  process.env.PATH = `${bin}:${process.env.PATH ?? ''}`
  return `the image's Node, v${imageNodeVersion}`
}
