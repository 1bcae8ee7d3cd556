// npm run bench:gc-run -- [--nodes 5000] [--deletions 50]
//
// Seeds a private real control plane with <nodes> Nodes, each with a NodeFeature and a
// NodeResourceTopology, starts the built CLI's `gc run --grace-period 0`, deletes <deletions> Nodes one
// after another and times each from the DELETE until both of its objects are gone. Prints the peak RSS
// of the gc run process and the latency percentiles next to their budgets (RSS <= 120 MB, p95 <= 1 s).
import {spawn} from 'node:child_process'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {createInterface} from 'node:readline'
import {parseArgs} from 'node:util'

import {ControlPlane} from '../test/controlplane/control-plane.js'
import {ensureBinaries, repoRoot} from '../test/controlplane/paths.js'
import {ensureNamespace, exists, nodeFeaturePath, topologyPath, seedNodesWithObjects} from '../test/support/seed.js'
import {waitFor} from '../test/support/wait.js'

const {values} = parseArgs({options: {deletions: {default: '50', type: 'string'}, nodes: {default: '5000', type: 'string'}}})
const nodes = Number(values.nodes)
const deletions = Number(values.deletions)
if (!Number.isInteger(nodes) || !Number.isInteger(deletions) || deletions < 1 || nodes < deletions) {
  process.stderr.write('bench:gc-run: --nodes and --deletions must be whole numbers with 1 <= deletions <= nodes\n')
  process.exit(2)
}
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

const dir = await mkdtemp(join(tmpdir(), 'nfdctl-bench-run-'))
const plane = await ControlPlane.start({binDir: await ensureBinaries(log), dir, log})
try {
  const client = await plane.client()
  await ensureNamespace(client, 'nfd')
  const names = [...Array(nodes).keys()].map((i) => `node-${i}`)
  const seedStarted = performance.now()
  await seedNodesWithObjects(client, names, 'nfd', 64)
  log(`seeded ${nodes} nodes and ${2 * nodes} objects in ${((performance.now() - seedStarted) / 1000).toFixed(1)}s`)

  const rssFile = join(dir, 'rss')
  const child = spawn(process.execPath, ['--require', join(repoRoot, 'bench/report-max-rss.cjs'), join(repoRoot, 'bin/run.js'), 'gc', 'run',
    '--kubeconfig', plane.kubeconfig, '--grace-period', '0', '--interval', '1h', '--metrics-port', '0', '--log-format', 'json'], {
    env: {...process.env, NFDCTL_BENCH_RSS_FILE: rssFile},
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const messages: string[] = []
  createInterface({input: child.stdout}).on('line', (line) => messages.push((JSON.parse(line) as {msg: string}).msg))
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  await waitFor('the first sweep of gc run', async () => messages.includes('sweep done'), {timeoutMs: 60_000})

  const latencies: number[] = []
  for (const node of names.slice(0, deletions)) {
    const started = performance.now()
    await client.request('DELETE', `/api/v1/nodes/${node}`)
    await waitFor(`objects of ${node} gone`, async () => !(await exists(client, nodeFeaturePath('nfd', node))) && !(await exists(client, topologyPath(node))), {intervalMs: 5, timeoutMs: 10_000})
    latencies.push(performance.now() - started)
  }
  child.kill('SIGTERM')
  const code = await exited
  if (code !== 0) throw new Error(`gc run exited ${code} on SIGTERM`)
  const peakRssMb = Number(await readFile(rssFile, 'utf8')) / 1024 / 1024
  client.close()

  const sorted = [...latencies].sort((a, b) => a - b)
  const percentile = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
  const p50 = percentile(50)
  const p95 = percentile(95)
  const row = (name: string, value: string, budget = ''): string => `${name.padEnd(40)} ${value.padEnd(12)} ${budget}`
  const rssOk = peakRssMb <= 120
  const p95Ok = p95 <= 1000
  process.stdout.write([
    `gc run: ${nodes} nodes, ${2 * nodes} objects, ${deletions} node deletions one after another, --grace-period 0`,
    row('peak RSS of gc run', `${peakRssMb.toFixed(0)} MB`, `budget <= 120 MB: ${rssOk ? 'PASS' : 'FAIL'}`),
    row('node deletion -> objects gone, p50', `${p50.toFixed(0)} ms`),
    row('node deletion -> objects gone, p95', `${p95.toFixed(0)} ms`, `budget <= 1000 ms: ${p95Ok ? 'PASS' : 'FAIL'}`),
    row('node deletion -> objects gone, max', `${sorted.at(-1)!.toFixed(0)} ms`),
    '',
  ].join('\n'))
  process.exitCode = rssOk && p95Ok ? 0 : 1
} finally {
  await plane.stop()
  await rm(dir, {force: true, recursive: true})
}
