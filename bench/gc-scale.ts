// npm run bench:gc-scale -- [--nodes 65000] [--stale 5000] [--deletions 100]
//
// The largest clusters a public cloud offers: <nodes> Nodes, each with a NodeFeature and a
// NodeResourceTopology, and <stale> objects of vanished nodes, seeded into a private real control plane as
// fast as it takes them. Then the installed CLI (as `npm pack` builds it): a full `gc once` sweep that
// collects the stale objects, and `gc run` started up, with <deletions> Nodes deleted one after another,
// each timed from the DELETE until both of its objects are gone.
// Budgets: full sweep <= 60 s, gc run peak RSS <= 250 MB, node deletion reaction p95 <= 250 ms.
// It takes tens of minutes (seeding ~200,000 objects is most of it); it is not part of npm test.
import {parseArgs} from 'node:util'

import {seedNodesWithObjects, seedObjectsWithoutNodes} from '../harness/controlplane/seed.js'
import {memoryOf, percentile, row, timeNodeDeletions, verdict} from './measure.js'
import {runGcOnce, startBench, startGcRun} from './setup.js'

const {values} = parseArgs({options: {deletions: {default: '100', type: 'string'}, nodes: {default: '65000', type: 'string'}, stale: {default: '5000', type: 'string'}}})
const nodes = Number(values.nodes)
const stale = Number(values.stale)
const deletions = Number(values.deletions)
if (![nodes, stale, deletions].every((n) => Number.isInteger(n) && n > 0) || stale % 2 !== 0 || deletions > nodes) {
  process.stderr.write('bench:gc-scale: --nodes, --stale (even) and --deletions (at most --nodes) must be positive whole numbers\n')
  process.exit(2)
}
const budgets = {reactionP95Ms: 250, runPeakMb: 250, sweepSeconds: 60}
const log = (line: string): void => {
  process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`)
}
log(`bench:gc-scale: ${nodes} nodes, ${2 * nodes + stale} objects; this takes tens of minutes (seeding is most of it)`)

const env = await startBench(log)
try {
  const {client} = env
  const names = [...Array(nodes).keys()].map((i) => `node-${i}`)
  const seedStarted = performance.now()
  const chunk = 5000
  for (let i = 0; i < names.length; i += chunk) {
    await seedNodesWithObjects(client, names.slice(i, i + chunk), 'nfd', 64)
    log(`seeded ${Math.min(i + chunk, nodes)} of ${nodes} nodes with their objects`)
  }
  await seedObjectsWithoutNodes(
    client,
    [...Array(stale / 2).keys()].map((i) => `gone-${i}`),
  )
  const seedSeconds = (performance.now() - seedStarted) / 1000
  const seeded = 3 * nodes + stale
  log(`seeded ${seeded} objects in ${seedSeconds.toFixed(0)} s (${(seeded / seedSeconds).toFixed(0)} /s)`)

  const {peakRss, report, seconds: sweepSeconds} = await runGcOnce(env, [], stale)
  const oncePeakMb = peakRss / 1024 / 1024
  log(`gc once: ${sweepSeconds.toFixed(1)} s, ${report.apiRequests} requests`)

  const runStarted = performance.now()
  const gc = await startGcRun(env, 300_000)
  const startupSeconds = (performance.now() - runStarted) / 1000
  const latencies = await timeNodeDeletions(client, names.slice(0, deletions))
  const run = await memoryOf(gc.pid)
  await gc.stop()

  const p95 = percentile(latencies, 95)
  const lists = report.apiRequests - stale
  process.stdout.write(
    [
      `gc at scale (installed CLI): ${nodes} nodes, ${2 * nodes} live objects, ${stale} stale; seeded in ${seedSeconds.toFixed(0)} s`,
      row('gc once: full sweep (whole process)', `${sweepSeconds.toFixed(1)} s`, `budget <= ${budgets.sweepSeconds} s: ${verdict(sweepSeconds <= budgets.sweepSeconds)}`),
      row(
        'gc once: API requests',
        String(report.apiRequests),
        `(${lists} list pages, ${stale} deletes; 429s ${report.apiThrottled}, window ${report.concurrency.lowest}-${report.concurrency.highest})`,
      ),
      row('gc once: peak RSS', `${oncePeakMb.toFixed(0)} MB`),
      row('gc run: start-up to first sweep done', `${startupSeconds.toFixed(1)} s`),
      row('gc run: node deletion -> objects gone, p50', `${percentile(latencies, 50).toFixed(0)} ms`),
      row('gc run: node deletion -> objects gone, p95', `${p95.toFixed(0)} ms`, `budget <= ${budgets.reactionP95Ms} ms: ${verdict(p95 <= budgets.reactionP95Ms)}`),
      row('gc run: steady RSS after the deletions', `${run.rssMb.toFixed(0)} MB`),
      row('gc run: peak RSS', `${run.peakMb.toFixed(0)} MB`, `budget <= ${budgets.runPeakMb} MB: ${verdict(run.peakMb <= budgets.runPeakMb)}`),
      '',
    ].join('\n'),
  )
  process.exitCode = sweepSeconds <= budgets.sweepSeconds && p95 <= budgets.reactionP95Ms && run.peakMb <= budgets.runPeakMb ? 0 : 1
} finally {
  await env.close()
}
