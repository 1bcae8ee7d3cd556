// npm run bench:gc -- --nodes 5000 --stale 4000 [--concurrency N] [--qps N] [--list-size 500] [--rounds 5]
//                      [--layout split|shared] [--node-labels 100] [--against <another installed CLI's bin/run.js>]...
//
// Seeds a private real control plane with <nodes> Nodes, each with a NodeFeature and a
// NodeResourceTopology and labelled as NFD labels a Node (--node-labels of nfd-master's feature labels
// besides the kubelet's; 0: the hostname only), plus <stale> objects of vanished nodes (half NodeFeatures, half topologies);
// runs the installed CLI (as `npm pack` builds it) `gc once` with its defaults (or the pace flags given);
// then re-seeds the same stale objects and deletes them with plain concurrent DELETEs (64 in flight, no
// rate limit) from this process; then the same loop once more, in a fresh process with the CLI's client and
// Node flags. The ceiling is the faster of the two loops (medians). Budgets: gc once, whole process, >= 90%
// of the ceiling's delete rate from 4,000 stale objects, >= 85% from 1,000 (where a process's start-up and
// the lists read before the first delete weigh more; none below); its peak RSS <= 100 MB. Where each
// process's time went (start-up to its first request, reads before its first DELETE, the deletes, exit) is
// printed beside. Each --against runs another installed CLI's `gc once` (an unpacked `npm pack` of another
// commit, its dependencies installed) in the same alternating rounds, so that one change is measured alone
// against the same server at the same moments. Before each measured run etcd is compacted and defragmented and the server left idle for 5 s.
// --layout split (default): the control plane on all CPUs but the last, every client on the last, as in a
// cluster, where the CLI does not run on the API server's cores; the ceiling is then the server's. shared:
// all on all CPUs, so each client's own CPU time is taken from the server it measures (context).
import {setTimeout as sleep} from 'node:timers/promises'
import {parseArgs} from 'node:util'

import {openCluster} from '../src/lib/kube/connect.js'
import {inParallel, nodeFeaturePath, seedNodesWithObjects, seedObjectsWithoutNodes, topologyPath} from '../harness/controlplane/seed.js'
import {row, verdict} from './measure.js'
import {runFreshDeleteLoop, runGcOnce, splitCpus, startBench, type FreshLoopRun, type GcOnceRun, type ProcessPhases} from './setup.js'

const {values} = parseArgs({
  options: {
    against: {multiple: true, type: 'string'},
    concurrency: {type: 'string'},
    layout: {default: 'split', type: 'string'},
    'list-size': {default: '500', type: 'string'},
    'node-labels': {default: '100', type: 'string'},
    nodes: {default: '5000', type: 'string'},
    qps: {type: 'string'},
    rounds: {default: '5', type: 'string'},
    stale: {default: '4000', type: 'string'},
  },
})
const nodes = Number(values.nodes)
const stale = Number(values.stale)
const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency)
const qps = values.qps === undefined ? undefined : Number(values.qps)
const ceilingConcurrency = 64
const rounds = Number(values.rounds)
const nodeLabels = Number(values['node-labels'])
const settleMs = 5000
if (![nodes, stale, rounds, concurrency ?? 1, qps ?? 1].every((n) => Number.isInteger(n) && n > 0) || stale % 2 !== 0 || !Number.isInteger(nodeLabels) || nodeLabels < 0) {
  process.stderr.write('bench:gc: --nodes, --stale (even), --rounds, --concurrency and --qps must be positive whole numbers, --node-labels a whole number\n')
  process.exit(2)
}
if (values.layout !== 'split' && values.layout !== 'shared') {
  process.stderr.write(`bench:gc: --layout must be split or shared, not "${values.layout}"\n`)
  process.exit(2)
}
const cpus = values.layout === 'split' ? splitCpus() : undefined
if (values.layout === 'split' && cpus === undefined) {
  process.stderr.write('bench:gc: --layout split needs at least 2 CPUs; run with --layout shared\n')
  process.exit(2)
}
/** The share of the ceiling gc once must reach at this many stale objects (the issue's sizes); none below 1,000. */
const budget = stale >= 4000 ? 0.9 : stale >= 1000 ? 0.85 : undefined
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

// The API server's own compaction (every 5 minutes) would land inside some measured runs and not others;
// instead etcd is compacted and defragmented before each one (quiesce below), the same for every run.
const env = await startBench(log, {apiserverFlags: ['--etcd-compaction-interval=0'], cpus})
try {
  const seeder = env.client
  const seedStarted = performance.now()
  const liveNames = [...Array(nodes).keys()].map((i) => `node-${i}`)
  const goneNames = [...Array(stale / 2).keys()].map((i) => `gone-${i}`)
  await seedNodesWithObjects(seeder, liveNames, 'nfd', 64, nodeLabels)
  // Each measured run finds the server with no other client's connections open: the seeder's and the
  // warm loop's keep-alive sockets are closed once they are done.
  const seedStale = async (): Promise<void> => {
    await seedObjectsWithoutNodes(seeder, goneNames)
    seeder.close()
  }
  await seedStale()
  /** Every measured run starts from the same state: etcd's history compacted away, its file defragmented, the server idle. */
  const quiesce = async (): Promise<void> => {
    await env.plane.compactEtcd(await env.plane.etcdRevision())
    await env.plane.defragmentEtcd()
    await sleep(settleMs)
  }
  const seeded = 2 * nodes + nodes + stale
  log(`seeded ${seeded} objects in ${((performance.now() - seedStarted) / 1000).toFixed(1)}s`)

  // The real CLI, as an operator runs it.
  const args = [...(concurrency === undefined ? [] : ['--concurrency', String(concurrency)]), ...(qps === undefined ? [] : ['--qps', String(qps)]), '--list-size', values['list-size']!]
  const {client} = await openCluster({kubeconfig: env.plane.kubeconfig}, {maxConnections: ceilingConcurrency})
  const paths = goneNames.flatMap((n) => [nodeFeaturePath('nfd', n), topologyPath(n)])
  // Rounds alternate gc once (and the --against CLIs) and the two loops on the same server, each round in
  // another order, so that none gets the quieter moments to itself; the medians are compared.
  const against = values.against ?? []
  const gcRuns: GcOnceRun[] = []
  const againstRuns: GcOnceRun[][] = against.map(() => [])
  const warmRuns: number[] = []
  const warmCpu: number[] = []
  const freshRuns: FreshLoopRun[] = []
  const measurements: Array<() => Promise<void>> = [
    async () => {
      gcRuns.push(await runGcOnce(env, args, stale))
    },
    ...against.map((bin, i) => async () => {
      againstRuns[i]!.push(await runGcOnce({...env, bin}, args, stale))
    }),
    async () => {
      const warmStarted = performance.now()
      const cpuBefore = process.cpuUsage()
      await inParallel(paths, ceilingConcurrency, (path) => client.request('DELETE', path))
      warmRuns.push((performance.now() - warmStarted) / 1000)
      const cpu = process.cpuUsage(cpuBefore)
      warmCpu.push((cpu.user + cpu.system) / 1e6)
      client.close()
    },
    async () => {
      freshRuns.push(await runFreshDeleteLoop(env, paths))
    },
  ]
  for (let round = 1; round <= rounds; round++) {
    for (let i = 0; i < measurements.length; i++) {
      if (round > 1 || i > 0) await seedStale()
      await quiesce()
      await measurements[(i + round - 1) % measurements.length]!()
    }
    const gcRun = gcRuns.at(-1)!
    for (const [i, bin] of against.entries()) log(`round ${round}: gc once of ${bin} ${againstRuns[i]!.at(-1)!.seconds.toFixed(2)} s`)
    const {concurrency: w, durationMs} = gcRun.report
    log(
      `round ${round}: gc once ${gcRun.seconds.toFixed(2)} s (sweep ${(durationMs / 1000).toFixed(2)} s, CPU ${gcRun.cpuSeconds.toFixed(2)} s, window ${w.lowest}-${w.highest}, final ${w.final}), warm loop ${warmRuns.at(-1)!.toFixed(2)} s (CPU ${warmCpu.at(-1)!.toFixed(2)} s), the same loop in a fresh process ${freshRuns.at(-1)!.seconds.toFixed(2)} s (CPU ${freshRuns.at(-1)!.cpuSeconds.toFixed(2)} s)`,
    )
  }
  const median = <T>(items: readonly T[], key: (item: T) => number): T => [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)]!
  /** Each phase's median over the rounds, in ms: start-up, reads before the first DELETE, the deletes, exit. */
  const phasesOf = (runs: ReadonlyArray<{phases: ProcessPhases}>): string => {
    const ms = (key: (p: ProcessPhases) => number): string => key(median(runs, (r) => key(r.phases)).phases).toFixed(0)
    return [
      `start-up ${ms((p) => p.firstRequestMs)}`,
      `reads ${ms((p) => p.firstDeleteMs - p.firstRequestMs)}`,
      `deletes ${ms((p) => p.lastAnswerMs - p.firstDeleteMs)}`,
      `exit ${ms((p) => p.exitMs - p.lastAnswerMs)} ms`,
    ].join(', ')
  }
  const {report, seconds: gcSeconds} = median(gcRuns, (r) => r.seconds)
  const warmSeconds = median(warmRuns, (s) => s)
  const peakRss = Math.max(...gcRuns.map((r) => r.peakRss))
  const freshSeconds = median(freshRuns, (r) => r.seconds).seconds
  // Both loops send the same plain DELETEs; whichever the server took faster is the better estimate of
  // what it can take (the fresh one also pays a process start).
  const ceilingSeconds = Math.min(warmSeconds, freshSeconds)
  const ceilingWhich = ceilingSeconds === warmSeconds ? 'the warm loop' : 'the fresh-process loop'

  const gcRate = stale / gcSeconds
  const ceilingRate = stale / ceilingSeconds
  const ratio = gcRate / ceilingRate
  process.stdout.write(
    [
      `gc once (installed CLI): ${nodes} nodes (${nodeLabels} NFD feature labels each), ${2 * nodes} live objects, ${stale} stale; concurrency ${concurrency ?? 'default'}, qps ${qps ?? 'none (default)'}, list-size ${values['list-size']}; medians of ${rounds} alternating rounds`,
      `CPUs: ${cpus === undefined ? 'shared: the control plane and the clients on all' : `split: the control plane on ${cpus.server}, the clients on ${cpus.clients}`}`,
      row('wall time (whole process)', `${gcSeconds.toFixed(2)} s`, `(rounds: ${gcRuns.map((r) => r.seconds.toFixed(2)).join(', ')} s)`),
      row('objects deleted per second', gcRate.toFixed(0)),
      row('API requests', String(report.apiRequests), `(${Math.ceil((2 * nodes + stale) / Number(values['list-size']))}+ lists, ${stale} deletes)`),
      row('peak RSS (highest of the rounds)', `${(peakRss / 1024 / 1024).toFixed(0)} MB`, `budget <= 100 MB: ${verdict(peakRss <= 100 * 1024 * 1024)}`),
      row('429 answers / window', `${report.apiThrottled} / ${report.concurrency.lowest}-${report.concurrency.highest}`),
      row(
        'plain concurrent DELETEs, warm loop',
        `${(stale / warmSeconds).toFixed(0)} /s`,
        `(${stale} deletes in ${warmSeconds.toFixed(2)} s, ${ceilingConcurrency} in flight, in this process; rounds: ${warmRuns.map((x) => x.toFixed(1)).join(', ')} s)`,
      ),
      row(
        'the same loop in a fresh process',
        `${(stale / freshSeconds).toFixed(0)} /s`,
        `(${freshSeconds.toFixed(2)} s from its start; rounds: ${freshRuns.map((r) => r.seconds.toFixed(1)).join(', ')} s)`,
      ),
      row('ceiling: the faster of the two', `${ceilingRate.toFixed(0)} /s`, `(${ceilingWhich})`),
      row(
        'client CPU (user + system), median',
        `${median(gcRuns, (r) => r.cpuSeconds).cpuSeconds.toFixed(2)} s`,
        `(warm loop: ${median(warmCpu, (s) => s).toFixed(2)} s, fresh loop: ${median(freshRuns, (r) => r.cpuSeconds).cpuSeconds.toFixed(2)} s${cpus === undefined ? '; the API server and etcd share the same cores' : ''})`,
      ),
      row('gc once, where its time went (medians)', phasesOf(gcRuns)),
      row('the fresh loop, where its time went', phasesOf(freshRuns)),
      ...against.flatMap((bin, i) => {
        const runs = againstRuns[i]!
        const seconds = median(runs, (r) => r.seconds).seconds
        return [
          row(
            `gc once of ${bin}`,
            `${seconds.toFixed(2)} s, ${((100 * ceilingSeconds) / seconds).toFixed(0)}% of the ceiling`,
            `(rounds: ${runs.map((r) => r.seconds.toFixed(2)).join(', ')} s; CPU ${median(runs, (r) => r.cpuSeconds).cpuSeconds.toFixed(2)} s)`,
          ),
          row('  where its time went', phasesOf(runs)),
        ]
      }),
      row('gc once / ceiling', `${(100 * ratio).toFixed(0)}%`, budget === undefined ? '(no budget below 1,000 stale)' : `budget >= ${100 * budget}% at ${stale} stale: ${verdict(ratio >= budget)}`),
      '',
    ].join('\n'),
  )
  process.exitCode = ratio >= (budget ?? 0) && peakRss <= 100 * 1024 * 1024 ? 0 : 1
} finally {
  await env.close()
}
