import {spawn} from 'node:child_process'
import {createHash} from 'node:crypto'
import {createWriteStream} from 'node:fs'
import {rename} from 'node:fs/promises'
import {join, posix} from 'node:path'
import {Transform} from 'node:stream'
import {pipeline} from 'node:stream/promises'

import {pack} from 'tar-stream'

/** One file system entry of a layer. Owned by root unless it says otherwise. */
export interface LayerEntry {
  /** Relative to the root, no leading slash: `usr/local/bin/node`. */
  readonly path: string
  readonly type: 'directory' | 'file' | 'symlink'
  /** Permission bits, with the sticky bit where it belongs (/tmp). */
  readonly mode: number
  readonly uid?: number
  readonly gid?: number
  /** A file's content, or how to read it when the layer is written (the Node binary is 100+ MB). */
  readonly data?: Buffer | (() => Promise<Buffer>)
  readonly linkname?: string
  /** The file's own time (a package's build time); the layer's time where absent. */
  readonly mtime?: Date
}

/** A written layer: its gzip blob and the digest of the tar inside (the config's diff_id). */
export interface LayerBlob {
  /** sha256 of the gzip blob, as the manifest names it. */
  readonly digest: string
  readonly size: number
  /** sha256 of the uncompressed tar. */
  readonly diffId: string
  readonly uncompressedSize: number
  /** Where the blob is: `<blobDir>/<hex>`. */
  readonly path: string
  /** What the layer holds, for the config's history. */
  readonly description: string
}

/**
 * gzip's settings are fixed for reproducible digests: GNU gzip (its deflate output has not changed in
 * decades, and does not depend on the CPU's features as zlib forks with SIMD hashing may), level 6, no
 * name or timestamp in the header (-n).
 */
const gzipArgs = ['-n', '-6', '-c']

/**
 * Writes entries as a tar layer, gzipped, into `blobDir`, named by digest. The tar is the same bytes for the
 * same entries: entries sorted by path, every parent directory present, no user or group names, and each
 * mtime the entry's own or the layer's `mtime`, never later than `clamp` (SOURCE_DATE_EPOCH's rule). A layer
 * whose files do not come from the commit (the libraries, the runtime) keeps their times rather than the
 * commit's, so it is the same blob from one commit to the next and a node pulls it once.
 */
export async function writeLayer(entries: readonly LayerEntry[], options: {blobDir: string; mtime: Date; clamp: Date; description: string}): Promise<LayerBlob> {
  const sorted = withParents(entries)
  const tar = pack()
  const gzip = spawn('gzip', gzipArgs, {stdio: ['pipe', 'pipe', 'inherit']})
  const gzipDone = new Promise<void>((resolve, reject) => {
    gzip.once('error', reject)
    gzip.once('exit', (code, signal) => (code === 0 ? resolve() : reject(new Error(`gzip exited with ${signal ?? code}`))))
  })
  const diff = counting()
  const blob = counting()
  const partial = join(options.blobDir, `layer-${process.pid}-${Math.random().toString(36).slice(2)}.partial`)
  const written = Promise.all([pipeline(tar, diff.stream, gzip.stdin), pipeline(gzip.stdout, blob.stream, createWriteStream(partial)), gzipDone])
  for (const entry of sorted) {
    const header = {
      gid: entry.gid ?? 0,
      gname: '',
      mode: entry.mode,
      mtime: new Date(Math.min((entry.mtime ?? options.mtime).getTime(), options.clamp.getTime())),
      name: entry.type === 'directory' ? `${entry.path}/` : entry.path,
      uid: entry.uid ?? 0,
      uname: '',
    }
    if (entry.type === 'symlink') await add(tar, {...header, linkname: entry.linkname, type: 'symlink'}, Buffer.alloc(0))
    else if (entry.type === 'directory') await add(tar, {...header, type: 'directory'}, Buffer.alloc(0))
    else await add(tar, {...header, type: 'file'}, typeof entry.data === 'function' ? await entry.data() : (entry.data ?? Buffer.alloc(0)))
  }
  tar.finalize()
  await written
  const hex = blob.hex()
  const path = join(options.blobDir, hex)
  await rename(partial, path)
  return {description: options.description, diffId: `sha256:${diff.hex()}`, digest: `sha256:${hex}`, path, size: blob.bytes(), uncompressedSize: diff.bytes()}
}

/** Sorted by path, each parent directory added (root-owned, 0755) where the entries do not list it. */
export function withParents(entries: readonly LayerEntry[]): LayerEntry[] {
  const byPath = new Map<string, LayerEntry>()
  for (const entry of entries) {
    if (entry.path === '' || entry.path.startsWith('/') || entry.path.endsWith('/') || entry.path.split('/').includes('..'))
      throw new Error(`layer entry path must be relative and plain: "${entry.path}"`)
    const before = byPath.get(entry.path)
    if (before !== undefined && !(before.type === 'directory' && entry.type === 'directory' && before.mode === entry.mode)) throw new Error(`layer lists ${entry.path} twice`)
    byPath.set(entry.path, entry)
  }
  for (const path of [...byPath.keys()]) {
    for (let parent = posix.dirname(path); parent !== '.'; parent = posix.dirname(parent)) {
      const known = byPath.get(parent)
      if (known !== undefined && known.type !== 'directory') throw new Error(`layer entry ${path} is below ${parent}, which is a ${known.type}`)
      if (known === undefined) byPath.set(parent, {mode: 0o755, path: parent, type: 'directory'})
    }
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

function add(tar: ReturnType<typeof pack>, header: Parameters<ReturnType<typeof pack>['entry']>[0], body: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    tar.entry({...header, size: body.length}, body, (error) => (error ? reject(error) : resolve()))
  })
}

/** A pass-through stream that hashes (sha256) and counts what goes through it. */
export function counting(): {stream: Transform; hex: () => string; bytes: () => number} {
  const hash = createHash('sha256')
  let bytes = 0
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk)
      bytes += chunk.length
      callback(null, chunk)
    },
  })
  return {bytes: () => bytes, hex: () => hash.digest('hex'), stream}
}
