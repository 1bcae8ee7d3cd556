import {createReadStream} from 'node:fs'
import {mkdir, open, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {createGunzip} from 'node:zlib'

import {extract} from 'tar-stream'

import {cachedDownload, checksumOfIntegrity, exists, fetchText} from './cache.js'
import type {LayerEntry} from './layer.js'
import {platforms, type Platform} from './platforms.js'

/**
 * The Node.js release the image runs: the active LTS line. The one place it is pinned; the node-lts test
 * runs the unit suite and the packed CLI under the same binary.
 */
export const imageNodeVersion = '26.12.1'

/** Where the runtime sits in the image. */
export const imageNodePath = '/usr/local/bin/node'

/** npm's registry, as npm itself is configured when run through `npm run` (npm_config_registry). */
export function npmRegistry(): string {
  return (process.env.npm_config_registry || 'https://registry.npmjs.org/').replace(/\/?$/, '/')
}

/**
 * The official Node binary for a platform, from the npm registry's `node-linux-<arch>` package: its tarball
 * in the cache, checked against the integrity the registry published for it. The integrity is kept beside
 * the tarball when it is first downloaded, so a cached runtime is verified without the network.
 */
export async function fetchNodeRuntime(platform: Platform, options: {cacheDir: string; log: (line: string) => void; version?: string}): Promise<string> {
  const version = options.version ?? imageNodeVersion
  const name = `node-linux-${platform.node}`
  const tarball = join(options.cacheDir, 'node', `${name}-${version}.tgz`)
  const integrityFile = `${tarball}.integrity`
  let integrity = (await exists(integrityFile)) ? (await readFile(integrityFile, 'utf8')).trim() : undefined
  let url = `${npmRegistry()}${name}/-/${name}-${version}.tgz`
  if (integrity === undefined) {
    const meta = JSON.parse(await fetchText(`${npmRegistry()}${name}/${version}`)) as {dist?: {integrity?: string; tarball?: string}}
    if (meta.dist?.integrity === undefined || meta.dist.tarball === undefined) throw new Error(`${name}@${version}: the registry gives no dist.integrity`)
    integrity = meta.dist.integrity
    url = meta.dist.tarball
  }
  await cachedDownload(url, tarball, checksumOfIntegrity(integrity), options.log)
  await writeFile(integrityFile, integrity + '\n')
  return tarball
}

export interface NodeRuntime {
  readonly node: Buffer
  readonly license: Buffer
  /** The binary's time in the tarball (npm gives every file the same). */
  readonly mtime: Date
}

/** `bin/node` and `LICENSE` out of a `node-linux-*` tarball (its headers and man pages stay out). */
export async function readNodeRuntime(tarball: string): Promise<NodeRuntime> {
  const wanted: Record<string, Buffer | undefined> = {'package/LICENSE': undefined, 'package/bin/node': undefined}
  let mtime: Date | undefined
  const reader = extract()
  createReadStream(tarball).pipe(createGunzip()).pipe(reader)
  for await (const entry of reader) {
    if (entry.header.name in wanted) {
      const chunks: Buffer[] = []
      for await (const chunk of entry) chunks.push(chunk as Buffer)
      wanted[entry.header.name] = Buffer.concat(chunks)
      if (entry.header.name === 'package/bin/node') mtime = entry.header.mtime
    } else entry.resume()
  }
  const node = wanted['package/bin/node']
  const license = wanted['package/LICENSE']
  if (node === undefined || license === undefined || mtime === undefined) throw new Error(`${tarball} holds no package/bin/node or package/LICENSE`)
  return {license, mtime, node}
}

export function nodeLayerEntries(runtime: NodeRuntime): LayerEntry[] {
  return [
    {data: runtime.node, mode: 0o755, path: imageNodePath.slice(1), type: 'file'},
    {data: runtime.license, mode: 0o644, path: 'usr/local/share/doc/node/LICENSE', type: 'file'},
  ]
}

/**
 * The image's Node for this machine, from the image build's cache, written as <binDir>/node to run here (the
 * start-up and memory benchmarks, the test of the suite and the packed CLI under it); undefined where the
 * image has no Node for this machine's architecture. Written in 32 KB writes, as tar and containerd's
 * unpacking write a file: Linux 6.x keeps a file written in one large write in large page-cache folios, and a
 * process that maps it then has whole folios resident (Node 26 idle: 57-70 MB of RSS against 40 MB).
 */
export async function installImageNodeHere(binDir: string, options: {cacheDir: string; log: (line: string) => void}): Promise<string | undefined> {
  const platform = Object.values(platforms).find((p) => p.node === process.arch)
  if (platform === undefined) return undefined
  const {node} = await readNodeRuntime(await fetchNodeRuntime(platform, options))
  await mkdir(binDir, {recursive: true})
  const path = join(binDir, 'node')
  const file = await open(path, 'w', 0o755)
  try {
    for (let offset = 0; offset < node.length; offset += 32 << 10) await file.write(node, offset, Math.min(32 << 10, node.length - offset))
  } finally {
    await file.close()
  }
  return path
}
