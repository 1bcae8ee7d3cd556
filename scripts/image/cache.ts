import {createHash} from 'node:crypto'
import {createReadStream, createWriteStream} from 'node:fs'
import {mkdir, rename, rm, stat} from 'node:fs/promises'
import {homedir} from 'node:os'
import {dirname, join} from 'node:path'
import {Readable} from 'node:stream'
import {pipeline} from 'node:stream/promises'

/** What a downloaded file must hash to: the registry's integrity, or the Debian index's SHA256. */
export interface Checksum {
  readonly algorithm: 'sha1' | 'sha256' | 'sha512'
  /** Lower-case hex. */
  readonly hex: string
}

/** Debian packages and Node runtimes, kept between builds: `${XDG_CACHE_HOME:-~/.cache}/nfdctl/image`. */
export function imageCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache')
  return join(base, 'nfdctl', 'image')
}

/** npm's `integrity` (`sha512-<base64>`, the strongest of several if listed) as a checksum. */
export function checksumOfIntegrity(integrity: string): Checksum {
  const strongest = integrity
    .split(/\s+/)
    .map((item) => /^(sha1|sha256|sha512)-([A-Za-z0-9+/=]+)$/.exec(item))
    .filter((m): m is RegExpExecArray => m !== null)
    .sort((a, b) => b[1].localeCompare(a[1]))[0]
  if (strongest === undefined) throw new Error(`unsupported integrity string: ${integrity}`)
  return {algorithm: strongest[1] as Checksum['algorithm'], hex: Buffer.from(strongest[2], 'base64').toString('hex')}
}

export async function fileChecksum(path: string, algorithm: Checksum['algorithm']): Promise<string> {
  const hash = createHash(algorithm)
  await pipeline(createReadStream(path), hash)
  return hash.digest('hex')
}

/**
 * The file at `path`, downloaded from `url` unless a copy with the right checksum is already there. A
 * download is written beside it and renamed only once it verifies, so the cache never holds a partial or
 * wrong file under its final name; a cached file that no longer verifies is fetched again.
 */
export async function cachedDownload(url: string, path: string, checksum: Checksum, log: (line: string) => void): Promise<string> {
  if (await exists(path)) {
    if ((await fileChecksum(path, checksum.algorithm)) === checksum.hex) return path
    log(`cache: ${path} does not match its ${checksum.algorithm}; downloading it again`)
  }
  await mkdir(dirname(path), {recursive: true})
  const partial = `${path}.${process.pid}.partial`
  log(`download ${url}`)
  try {
    await download(url, partial)
    const actual = await fileChecksum(partial, checksum.algorithm)
    if (actual !== checksum.hex) throw new Error(`${url}: ${checksum.algorithm} is ${actual}, expected ${checksum.hex}`)
    await rename(partial, path)
  } finally {
    await rm(partial, {force: true})
  }
  return path
}

/** The response body of a GET, as a file; an HTTP error status throws (404 with `notFound` set). */
export async function download(url: string, path: string): Promise<void> {
  const response = await fetch(url)
  if (!response.ok || response.body === null) throw new HttpError(url, response.status)
  await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), createWriteStream(path))
}

export async function fetchText(url: string): Promise<string> {
  const response = await fetch(url)
  if (!response.ok) throw new HttpError(url, response.status)
  return response.text()
}

export class HttpError extends Error {
  readonly status: number
  constructor(url: string, status: number) {
    super(`GET ${url}: HTTP ${status}`)
    this.status = status
  }
}

export async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}
