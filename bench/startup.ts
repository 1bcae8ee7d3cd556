// npm run bench:startup [-- --runs N]
// The installed CLI's start-up against Node's own, under the oldest Node nfdctl supports (the `node` on PATH)
// and the image's Node LTS (scripts/image/node-runtime.ts), each case a whole process from spawn to exit:
// `node -e 0`, `nfdctl --help`, `nfdctl version` and `nfdctl gc once --dry-run` against an empty control
// plane, and as the floor under gc once's budget a plain Node program making the same three lists
// (bench/https-floor.cjs). The cases take turns within each round, so a busy machine slows them alike; every ratio is of
// medians from the same run and the same Node binary, printed beside its budget.
import {spawn} from 'node:child_process'
import {join} from 'node:path'
import {parseArgs} from 'node:util'

import {imageCacheDir} from '../scripts/image/cache.js'
import {imageNodeVersion, installImageNodeHere} from '../scripts/image/node-runtime.js'
import {percentile, roomOverFloor, row, verdict} from './measure.js'
import {startBench} from './setup.js'

/**
 * Budgets, as ratios to `node -e 0` of the same binary: an operator's `--help` (and a shell's completion,
 * a CronJob's first line) should cost little more than starting Node; a dry-run sweep of an empty cluster
 * adds a kubeconfig, a TLS connection and three lists.
 */
const budgets = {gcOnce: 2.5, help: 1.8}
const httpsFloor = new URL('https-floor.cjs', import.meta.url).pathname

const {values} = parseArgs({options: {runs: {default: '20', type: 'string'}}})
const runs = Number(values.runs)
if (!Number.isInteger(runs) || runs < 3) {
  process.stderr.write(`--runs must be an integer of at least 3, got "${values.runs}"\n`)
  process.exit(2)
}

const log = (line: string): void => {
  process.stderr.write(`${line}\n`)
}

const env = await startBench(log)
let failed = false
try {
  const nodes: Array<{name: string; dir?: string}> = [{name: `oldest supported (node on PATH, ${process.version})`}]
  const imageNodeDir = join(env.dir, 'image-node', 'bin')
  if ((await installImageNodeHere(imageNodeDir, {cacheDir: imageCacheDir(), log})) === undefined) log(`the image has no Node for ${process.arch}: only the node on PATH is measured`)
  else nodes.push({dir: imageNodeDir, name: `image LTS (v${imageNodeVersion})`})
  const kubeconfig = ['--kubeconfig', env.plane.kubeconfig]
  const cases = [
    {args: ['-e', '0'], name: 'node -e 0', node: true},
    {args: ['--help'], budget: budgets.help, name: 'nfdctl --help'},
    {args: ['version'], name: 'nfdctl version'},
    {args: ['gc', 'once', '--dry-run', ...kubeconfig], budget: budgets.gcOnce, name: 'nfdctl gc once --dry-run (empty cluster)'},
    // The floor under gc once's budget: the same three lists from a plain Node program (bench/https-floor.cjs).
    {args: [httpsFloor, env.plane.kubeconfig], floorUnder: budgets.gcOnce, name: 'floor: the three lists, node:https only', node: true},
  ]
  console.log(`start-up: medians of ${runs} interleaved runs after one warm-up round; ratios to node -e 0 of the same binary`)
  for (const node of nodes) {
    // bin/run.js is run directly, as npm's bin link runs it: its `#!/usr/bin/env -S node <flags>` line finds the
    // Node under test first on PATH, flags included.
    const path = node.dir === undefined ? process.env.PATH : `${node.dir}:${process.env.PATH ?? ''}`
    const processEnv = {...process.env, PATH: path}
    const times = cases.map((): number[] => [])
    for (let round = 0; round <= runs; round++) {
      for (const [i, c] of cases.entries()) {
        const ms = await timeProcess(c.node ? 'node' : env.bin, c.args, processEnv, c.name)
        if (round > 0) times[i]!.push(ms)
      }
    }
    const bare = percentile(times[0]!, 50)
    console.log(`${node.name}: node -e 0 ${bare.toFixed(0)} ms`)
    for (const [i, c] of cases.entries()) {
      if (i === 0) continue
      const median = percentile(times[i]!, 50)
      const ratio = median / bare
      const figure = `${median.toFixed(0)} ms ${ratio.toFixed(2)}×`
      if (c.floorUnder !== undefined) console.log(row(`  ${c.name}`, figure, `(floor; gc once's ${c.floorUnder}× ${roomOverFloor(c.floorUnder * bare, median, 'ms')})`))
      else if (c.budget === undefined) console.log(row(`  ${c.name}`, figure, '(no budget)'))
      else {
        const ok = ratio <= c.budget
        failed ||= !ok
        console.log(row(`  ${c.name}`, figure, `≤ ${c.budget}×: ${verdict(ok)}`))
      }
    }
  }
} finally {
  await env.close()
}
process.exitCode = failed ? 1 : 0

/** Milliseconds from spawn to exit; the command must exit 0 (stdout is dropped: a pipe's reader would be timed too). */
function timeProcess(file: string, args: readonly string[], processEnv: NodeJS.ProcessEnv, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let stderr = ''
    const started = performance.now()
    const child = spawn(file, args, {env: processEnv, stdio: ['ignore', 'ignore', 'pipe']})
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) => {
      const ms = performance.now() - started
      if (code === 0) resolve(ms)
      else reject(new Error(`${name} exited ${code}: ${stderr.trim().slice(0, 500)}`))
    })
  })
}
