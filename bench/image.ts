// npm run bench:image [-- --archive <oci archive>] [--runs N]
// The image's size per platform (what a node pulls, and what it unpacks) and the CLI's start-up inside the
// amd64 image (its layers as a root file system, entered with unshare as user 65532), each beside its
// budget. Builds the image from HEAD first unless --archive names one. Start-up needs root: without it
// those rows say "not measured" and the exit code is the size budgets' alone.
import {createReadStream} from 'node:fs'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Writable} from 'node:stream'
import {pipeline} from 'node:stream/promises'
import {parseArgs} from 'node:util'
import {createGunzip} from 'node:zlib'

import {OciLayout, runInImage} from '../harness/oci-image.js'
import {buildImage} from '../scripts/image/build.js'
import {row, verdict} from './measure.js'

/**
 * Budgets. Size: the official Node binary is about 49.6 MB of gzip and 150 MB unpacked whatever we do; the
 * rest (CLI and production dependencies 5 MB, libraries 2 MB, koffi 0.3 MB) is ours. The budgets leave
 * room for Node to grow within its LTS line and fail on what would be a mistake: dev dependencies in the
 * image (TypeScript and Biome alone are tens of MB), a whole Debian package instead of its libraries, a
 * second platform's native modules. Start-up: `--help` and `version` are what an operator runs first in a
 * pod (kubectl exec, a CronJob's first line); Node itself starts in about 60 ms here (with unshare). Both are
 * answered without starting oclif (src/cli/before-oclif.ts), so 100 ms holds them to Node's start plus the
 * files they read, and fails on oclif's start (its configuration and help classes: over 200 ms here) or an
 * eager heavy import.
 */
const budgets = {compressedMb: 60, helpMs: 100, uncompressedMb: 200, versionMs: 100}

const {values} = parseArgs({options: {archive: {type: 'string'}, runs: {default: '10', type: 'string'}}})
const runs = Number(values.runs)
if (!Number.isInteger(runs) || runs < 1) {
  process.stderr.write(`--runs must be a positive integer, got "${values.runs}"\n`)
  process.exit(2)
}

const work = await mkdtemp(join(tmpdir(), 'nfdctl-bench-image-'))
let failed = false
try {
  let archive = values.archive
  if (archive === undefined) {
    const started = performance.now()
    const built = await buildImage({log: (line) => process.stderr.write(`${line}\n`), outDir: join(work, 'out')})
    archive = built.archive
    console.log(row('build (npm run image, both platforms)', `${((performance.now() - started) / 1000).toFixed(0)} s`, '(no budget; downloads cached)'))
  }
  const layout = await OciLayout.extract(archive, join(work, 'layout'))
  const index = await layout.index()
  console.log(`image ${index.digest}`)
  for (const descriptor of index.manifests) {
    const architecture = descriptor.platform!.architecture
    const {configSize, manifest} = await layout.platform(architecture)
    const compressed = manifest.layers.reduce((sum, layer) => sum + layer.size, 0) + configSize
    let uncompressed = 0
    for (const layer of manifest.layers) uncompressed += await gunzippedSize(layout.blobPath(layer.digest))
    const compressedOk = compressed / 1e6 <= budgets.compressedMb
    const uncompressedOk = uncompressed / 1e6 <= budgets.uncompressedMb
    failed ||= !compressedOk || !uncompressedOk
    console.log(row(`${architecture}: compressed (layers + config)`, mb(compressed), `≤ ${budgets.compressedMb} MB: ${verdict(compressedOk)}`))
    console.log(row(`${architecture}: uncompressed (layers unpacked)`, mb(uncompressed), `≤ ${budgets.uncompressedMb} MB: ${verdict(uncompressedOk)}`))
    console.log(`  layers: ${manifest.layers.map((layer) => mb(layer.size)).join(', ')} (libraries, Node, CLI, koffi)`)
  }

  if (process.getuid?.() !== 0) {
    // The sizes stand on their own; a start-up figure needs unshare --root and a setuid to 65532.
    for (const name of ['node -e 0', 'nfdctl --help', 'nfdctl version']) console.log(row(`amd64: ${name}`, 'not measured', '(needs root)'))
  } else {
    const {config, manifest} = await layout.platform('amd64')
    const rootfs = join(work, 'rootfs')
    await layout.unpack(manifest, rootfs)
    const time = async (args: readonly string[], entrypoint?: readonly string[]): Promise<{median: number; min: number; max: number}> => {
      await runInImage(rootfs, config, args, entrypoint) // a first run reads the files into the page cache
      const times: number[] = []
      for (let i = 0; i < runs; i++) {
        const result = await runInImage(rootfs, config, args, entrypoint)
        if (result.code !== 0) throw new Error(`${args.join(' ')} in the image exited ${result.code}: ${result.stderr.trim()}`)
        times.push(result.ms)
      }
      times.sort((a, b) => a - b)
      return {max: times.at(-1)!, median: times[Math.floor(times.length / 2)]!, min: times[0]!}
    }
    const ms = (t: {median: number; min: number; max: number}): string => `${t.median.toFixed(0)} ms (${t.min.toFixed(0)}–${t.max.toFixed(0)})`
    const bare = await time(['-e', '0'], ['/usr/local/bin/node'])
    console.log(row(`amd64: node -e 0 (median of ${runs})`, ms(bare), '(no budget: Node and unshare alone)'))
    for (const [args, budget] of [
      [['--help'], budgets.helpMs],
      [['version'], budgets.versionMs],
    ] as const) {
      const t = await time(args)
      const ok = t.median <= budget
      failed ||= !ok
      console.log(row(`amd64: nfdctl ${args.join(' ')} (median of ${runs})`, ms(t), `≤ ${budget} ms: ${verdict(ok)}`))
    }
  }
} finally {
  await rm(work, {force: true, recursive: true})
}
process.exitCode = failed ? 1 : 0

function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`
}

async function gunzippedSize(path: string): Promise<number> {
  let bytes = 0
  await pipeline(
    createReadStream(path),
    createGunzip(),
    new Writable({
      write(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length
        callback()
      },
    }),
  )
  return bytes
}
