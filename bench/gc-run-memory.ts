// tsx bench/gc-run-memory.ts <variants.json> [rounds]   (LAB_NODES=2000, LAB_STALE=1000)
//
// Where `gc run`'s memory goes, and what a lever moves: one private control plane seeded once with
// LAB_NODES Nodes and their objects; then, in turns for each round, each variant (a package unpacked from
// `npm pack`, Node flags in place of its `#!` line's, extra `gc run` arguments, environment) is started on
// LAB_STALE fresh stale objects with bench/memory-probe.cjs preloaded, and stopped 3 s after they are gone.
// Prints each run's peak RSS (the kernel's VmHWM) and the probe's sample at the peak; the probe's files
// (memory-<name>-<round>.json, with the smaps breakdown) stay in $LAB_DIR (default /tmp/nfdctl-gc-memory).
// A variant with "upstream": true is an nfd-gc binary started as its Deployment does.
// Variants: [{"name": "base", "pkg": "/tmp/a/package"}, {"name": "semi1", "pkg": "/tmp/a/package",
// "flags": ["--max-semi-space-size=1", "--no-opt", "--expose-gc"]}, {"name": "c16", "pkg": …, "args":
// ["--concurrency", "16"]}, {"name": "snapshot", "pkg": …, "env": {"MEMORY_PROBE_SNAPSHOT": "/tmp/s.heapsnapshot"}}]
import {spawn} from 'node:child_process'
import {mkdirSync, readFileSync} from 'node:fs'
import {readFile, rm} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {ControlPlane} from '../harness/controlplane/control-plane.js'
import {ensureBinaries, repoRoot} from '../harness/controlplane/paths.js'
import {ensureNamespace, seedNodesWithObjects, seedObjectsWithoutNodes} from '../harness/controlplane/seed.js'
import {waitFor} from '../harness/process/wait.js'
import {countObjects, memoryOf} from './measure.js'
import {gcRunArgs, shebangFlags, upstreamGcArgs} from './setup.js'

interface Variant {
  readonly name: string
  readonly pkg: string
  readonly flags?: readonly string[]
  readonly env?: Record<string, string>
  readonly args?: readonly string[]
  readonly upstream?: boolean
}

const variants = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Variant[]
const rounds = Number(process.argv[3] ?? 1)
const nodes = Number(process.env.LAB_NODES ?? 2000)
const stale = Number(process.env.LAB_STALE ?? 1000)
const dir = process.env.LAB_DIR ?? '/tmp/nfdctl-gc-memory'
const probe = join(repoRoot, 'bench/memory-probe.cjs')
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

mkdirSync(dir, {recursive: true})
const planeDir = join(dir, `controlplane-${Date.now()}`)
const plane = await ControlPlane.start({binDir: await ensureBinaries(log), dir: planeDir, log})
const client = await plane.client()
try {
  await ensureNamespace(client, 'nfd')
  await seedNodesWithObjects(
    client,
    [...Array(nodes).keys()].map((i) => `node-${i}`),
    'nfd',
    64,
  )
  const gone = [...Array(stale / 2).keys()].map((i) => `gone-${i}`)
  for (let round = 0; round < rounds; round++) {
    for (const variant of variants) {
      await seedObjectsWithoutNodes(client, gone)
      const probeFile = join(dir, `memory-${variant.name}-${round}.json`)
      const env = {...process.env, MEMORY_PROBE_FILE: probeFile, NODE_OPTIONS: `--require ${probe}`, ...variant.env}
      const child = variant.upstream
        ? spawn(variant.pkg, upstreamGcArgs(plane.kubeconfig), {env, stdio: 'ignore'})
        : spawn('node', [...(variant.flags ?? shebangFlags(join(variant.pkg, 'bin/run.js'))), join(variant.pkg, 'bin/run.js'), ...gcRunArgs(plane.kubeconfig), ...(variant.args ?? [])], {
            env,
            stdio: ['ignore', 'ignore', 'inherit'],
          })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      const started = performance.now()
      // Upstream deletes at client-go's default 5 requests a second.
      await waitFor(`${variant.name}: the stale objects gone`, async () => (await countObjects(client)) === 2 * nodes, {intervalMs: 100, timeoutMs: 400_000})
      const seconds = (performance.now() - started) / 1000
      await sleep(3000)
      const memory = await memoryOf(child.pid!)
      child.kill('SIGTERM')
      await exited
      const atPeak = variant.upstream ? '' : ` at the peak: ${JSON.stringify((JSON.parse(await readFile(probeFile, 'utf8')) as {peakSample: unknown}).peakSample)}`
      process.stdout.write(`${variant.name} round ${round}: stale gone in ${seconds.toFixed(1)} s, peak ${memory.peakMb.toFixed(1)} MB, then ${memory.rssMb.toFixed(1)} MB${atPeak}\n`)
    }
  }
} finally {
  client.close()
  await plane.stop()
  await rm(planeDir, {force: true, recursive: true})
}
