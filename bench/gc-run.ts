// npm run bench:gc-run -- [--nodes 5000] [--deletions 50] [--scale-down 2000]
//
// Seeds a private real control plane with <nodes> Nodes, each with a NodeFeature and a
// NodeResourceTopology, and starts the installed CLI's (as `npm pack` builds it) `gc run --grace-period 0`.
// Then: its steady RSS, idle after the first sweep; <deletions> Nodes deleted one after another, each
// timed from the DELETE until both of its objects are gone; a node pool of <scale-down> Nodes (with their
// objects) added, then scaled down at once, timed until all their objects are gone; its steady RSS again
// and its peak RSS over the whole run. Budgets: steady <= 80 MB, peak <= 100 MB, reaction p95 <= 1 s.
import {setTimeout as sleep} from 'node:timers/promises'
import {parseArgs} from 'node:util'

import {inParallel, seedNodesWithObjects} from '../harness/controlplane/seed.js'
import {waitFor} from '../harness/process/wait.js'
import {countObjects, memoryOf, percentile, row, timeNodeDeletions, verdict} from './measure.js'
import {startBench, startGcRun} from './setup.js'

const {values} = parseArgs({options: {deletions: {default: '50', type: 'string'}, nodes: {default: '5000', type: 'string'}, 'scale-down': {default: '2000', type: 'string'}}})
const nodes = Number(values.nodes)
const deletions = Number(values.deletions)
const scaleDown = Number(values['scale-down'])
if (![nodes, deletions, scaleDown].every(Number.isInteger) || deletions < 1 || scaleDown < 1 || nodes < deletions) {
  process.stderr.write('bench:gc-run: --nodes, --deletions and --scale-down must be whole numbers with 1 <= deletions <= nodes\n')
  process.exit(2)
}
const budgets = {peakMb: 100, reactionP95Ms: 1000, steadyMb: 80}
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

const env = await startBench(log)
try {
  const {client} = env
  const names = [...Array(nodes).keys()].map((i) => `node-${i}`)
  const pool = [...Array(scaleDown).keys()].map((i) => `pool-${i}`)
  const seedStarted = performance.now()
  await seedNodesWithObjects(client, names, 'nfd', 64)
  log(`seeded ${nodes} nodes and ${2 * nodes} objects in ${((performance.now() - seedStarted) / 1000).toFixed(1)}s`)

  const gc = await startGcRun(env, 120_000)
  await sleep(10_000)
  const steadyMb = (await memoryOf(gc.pid)).rssMb
  log(`steady after the first sweep: ${steadyMb.toFixed(0)} MB`)

  const latencies = await timeNodeDeletions(client, names.slice(0, deletions))

  await seedNodesWithObjects(client, pool, 'nfd', 64)
  log(`added a pool of ${scaleDown} nodes with their objects`)
  const before = await countObjects(client)
  const scaleStarted = performance.now()
  await inParallel(pool, 64, (node) => client.request('DELETE', `/api/v1/nodes/${node}`))
  const nodesDeletedMs = performance.now() - scaleStarted
  await waitFor(`the ${2 * scaleDown} objects of the scaled-down pool gone`, async () => (await countObjects(client)) === before - 2 * scaleDown, {intervalMs: 200, timeoutMs: 300_000})
  const cleanupSeconds = (performance.now() - scaleStarted) / 1000
  await sleep(10_000)
  const after = await memoryOf(gc.pid)

  await gc.stop()

  const p95 = percentile(latencies, 95)
  const steadyOk = steadyMb <= budgets.steadyMb
  const peakOk = after.peakMb <= budgets.peakMb
  const p95Ok = p95 <= budgets.reactionP95Ms
  process.stdout.write(
    [
      `gc run (installed CLI): ${nodes} nodes, ${2 * nodes} objects, --grace-period 0; ${deletions} node deletions one after another; a pool of ${scaleDown} nodes (${2 * scaleDown} objects) added, then scaled down at once`,
      row('steady RSS, idle after the first sweep', `${steadyMb.toFixed(0)} MB`, `budget <= ${budgets.steadyMb} MB: ${verdict(steadyOk)}`),
      row('node deletion -> objects gone, p50', `${percentile(latencies, 50).toFixed(0)} ms`),
      row('node deletion -> objects gone, p95', `${p95.toFixed(0)} ms`, `budget <= ${budgets.reactionP95Ms} ms: ${verdict(p95Ok)}`),
      row('node deletion -> objects gone, max', `${Math.max(...latencies).toFixed(0)} ms`),
      row(`scale-down: ${2 * scaleDown} objects gone after`, `${cleanupSeconds.toFixed(1)} s`, `(its ${scaleDown} node DELETEs took ${(nodesDeletedMs / 1000).toFixed(1)} s)`),
      row('steady RSS, idle after the scale-down', `${after.rssMb.toFixed(0)} MB`),
      row('peak RSS of gc run (whole run)', `${after.peakMb.toFixed(0)} MB`, `budget <= ${budgets.peakMb} MB: ${verdict(peakOk)}`),
      '',
    ].join('\n'),
  )
  process.exitCode = steadyOk && peakOk && p95Ok ? 0 : 1
} finally {
  await env.close()
}
