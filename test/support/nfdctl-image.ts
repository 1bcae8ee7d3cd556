import {execFile} from 'node:child_process'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, join} from 'node:path'
import {promisify} from 'node:util'

import type {NodeImage} from '../../harness/node/workloads.js'
import {type BuiltImage, buildImage} from '../../scripts/image/build.js'
import {missingPrerequisite} from './prerequisites.js'
import {stopAtRunEnd} from './run-end.js'

const log = (line: string): void => {
  process.stderr.write(`      ${line}\n`)
}

let built: Promise<BuiltImage> | undefined
let outDir: string | undefined

/** The image `npm run image` builds from the committed HEAD, both platforms, built once per test run. */
export async function builtImage(context: Mocha.Context): Promise<BuiltImage> {
  context.timeout(15 * 60_000)
  built ??= (async () => {
    outDir = await mkdtemp(join(tmpdir(), 'nfdctl-image-'))
    return buildImage({log, outDir})
  })()
  try {
    return await built
  } catch (error) {
    // A missing tool or an unreachable download is the machine's; anything else is a bug in the build.
    const text = `${(error as NodeJS.ErrnoException).code ?? ''} ${(error as Error).message} ${String((error as Error).cause ?? '')}`
    if (/ENOENT|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ENETUNREACH|fetch failed|not found in the cache/i.test(text)) {
      return missingPrerequisite(context, `the image could not be built: ${(error as Error).message}`)
    }
    throw error
  }
}

// The archive (about 115 MB) goes with the run; the build's caches stay.
stopAtRunEnd(async () => {
  if (outDir !== undefined) await rm(outDir, {force: true, recursive: true})
})

/**
 * NFDCTL_TEST_IMAGE=<archive> reuses an archive `npm run image` built (while iterating on a test; CI never
 * sets it): the name comes from its index, the tag from its file name.
 */
export async function nfdctlImage(context: Mocha.Context): Promise<NodeImage> {
  const given = process.env.NFDCTL_TEST_IMAGE
  if (given) {
    const {stdout} = await promisify(execFile)('tar', ['-xOf', given, 'index.json'])
    const ref = (JSON.parse(stdout) as {manifests: Array<{annotations?: Record<string, string>}>}).manifests[0].annotations?.['io.containerd.image.name']
    if (ref === undefined) throw new Error(`NFDCTL_TEST_IMAGE=${given}: its index names no image`)
    return {archive: given, name: 'localhost/nfdctl-test/nfdctl', ref, tag: basename(given).replace(/\.oci\.tar$/, '')}
  }
  const image = await builtImage(context)
  return {archive: image.archive, name: 'localhost/nfdctl-test/nfdctl', ref: image.ref, tag: image.commit.slice(0, 12)}
}
