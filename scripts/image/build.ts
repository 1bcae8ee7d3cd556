import {existsSync} from 'node:fs'
import {mkdir, mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

import {appLayerEntries, cachePlatformPackages, cliEntrypoint, exportCommit, installCli, packCli} from './app-layer.js'
import {imageCacheDir} from './cache.js'
import {baseLayerEntries, fetchDebianPackages, lockedDebianPackages, readDebs} from './debian-libs.js'
import {writeLayer, type LayerBlob} from './layer.js'
import {imageNodeVersion, fetchNodeRuntime, nodeLayerEntries, readNodeRuntime} from './node-runtime.js'
import {writeOciArchive, type PlatformImage} from './oci-archive.js'
import {allArchitectures, platformName, platforms, type Platform} from './platforms.js'

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url))

/** Where `npm run image` writes its archive unless told otherwise (git ignores it). */
export const defaultOutDir = join(repoRoot, 'dist-image')

/** The image's repository; deploy/ names `<this>:<version>`. */
export const imageRepository = 'ghcr.io/nfdctl/nfdctl'

const defaultSource = 'https://github.com/nfdctl/nfdctl'

export interface BuildImageOptions {
  /** The repository to build from; this checkout by default. */
  readonly repo?: string
  /** The commit (any revision git names); HEAD by default. */
  readonly commit?: string
  /** Where the archive goes; dist-image/ in the repository by default. */
  readonly outDir?: string
  /** The image reference the archive names; `ghcr.io/nfdctl/nfdctl:<package.json version>` by default. */
  readonly ref?: string
  /** The platforms, amd64 and arm64 by default. */
  readonly architectures?: ReadonlyArray<Platform['architecture']>
  /** Resolve the Debian packages again from the archive's signed indexes and rewrite the lock. */
  readonly refreshDebian?: boolean
  /** Downloads kept between builds; `${XDG_CACHE_HOME:-~/.cache}/nfdctl/image` by default. */
  readonly cacheDir?: string
  /** Progress, one line at a time; stderr by default. */
  readonly log?: (line: string) => void
}

export interface BuiltLayer {
  readonly digest: string
  readonly size: number
  readonly diffId: string
  readonly uncompressedSize: number
  readonly description: string
}

export interface BuiltPlatform {
  /** `linux/amd64`, `linux/arm64/v8`. */
  readonly platform: string
  readonly architecture: Platform['architecture']
  readonly manifestDigest: string
  readonly configDigest: string
  readonly layers: readonly BuiltLayer[]
  /** What a pull of this platform transfers: the layers' gzip blobs and the config. */
  readonly compressedSize: number
  /** The layers as tars, unpacked. */
  readonly uncompressedSize: number
  readonly entrypoint: readonly string[]
}

export interface BuiltImage {
  /** Absolute path of the oci-archive. */
  readonly archive: string
  /** Digest of the multi-platform image index: the image's identity (what a registry tag points at). */
  readonly indexDigest: string
  readonly ref: string
  readonly version: string
  readonly commit: string
  /** Commit time, RFC 3339: the image's `created`, the CLI's files' mtime and the latest any file has. */
  readonly created: string
  readonly nodeVersion: string
  readonly platforms: readonly BuiltPlatform[]
}

/**
 * Builds the nfdctl image for Linux amd64 and arm64 as an oci-archive, from one commit of this repository
 * and nothing pulled from a container registry: the shared libraries Node and koffi link against (Debian
 * 12 packages), the official Node runtime (npm's `node-linux-*`), and the packed CLI with its production
 * dependencies. Two builds of the same commit give the same index digest.
 */
export async function buildImage(options: BuildImageOptions = {}): Promise<BuiltImage> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const repo = resolve(options.repo ?? repoRoot)
  const cacheDir = options.cacheDir ?? imageCacheDir()
  const chosen = (options.architectures ?? allArchitectures).map((arch) => platforms[arch])
  const outDir = resolve(options.outDir ?? defaultOutDir)
  const stage = await mkdtemp(join(tmpdir(), 'nfdctl-image-'))
  try {
    const source = await exportCommit(repo, options.commit ?? 'HEAD', join(stage, 'src'))
    const ref = options.ref ?? `${imageRepository}:${source.version}`
    const mtime = new Date(source.commitTime * 1000)
    const created = mtime.toISOString().replace('.000Z', 'Z')
    log(`image: ${ref} from ${source.commit} (${created}), ${chosen.map(platformName).join(', ')}, Node ${imageNodeVersion}`)

    // The commit's own lock decides its libraries (a commit from before the lock takes the checkout's; a
    // refresh resolves them anew and writes the checkout's).
    const committedLock = join(source.dir, 'scripts', 'image', 'debian.lock.json')
    const lockPath = existsSync(committedLock) ? committedLock : undefined
    const locked = await lockedDebianPackages(chosen, {cacheDir, lockPath, log, refresh: options.refreshDebian})
    const downloads = Promise.all([fetchDebianPackages(locked, {cacheDir, log}), Promise.all(chosen.map((platform) => fetchNodeRuntime(platform, {cacheDir, log})))]).then(([debs, nodes]) =>
      chosen.map((platform, i) => ({debs: debs.get(platform)!, node: nodes[i]!})),
    )
    downloads.catch(() => {}) // awaited below; not an unhandled rejection while npm pack runs
    log('image: npm pack')
    const tarball = await packCli(source, repo, stage, (line) => log(`  ${line}`))
    const apps: string[] = []
    for (const platform of chosen) {
      log(`image: npm ci --omit=dev for ${platformName(platform)}`)
      apps.push(await installCli(tarball, source, platform, join(stage, platform.architecture), (line) => log(`  ${line}`)))
    }
    const fetched = await downloads
    const blobDir = join(stage, 'blobs')
    await mkdir(blobDir)

    const images: PlatformImage[] = await Promise.all(
      chosen.map(async (platform, i): Promise<PlatformImage> => {
        const app = apps[i]!
        const runtime = await readNodeRuntime(fetched[i]!.node)
        const koffi = await readFile(join(app, 'node_modules', '@koromix', `koffi-linux-${platform.node}`, `linux_${platform.node}`, 'koffi.node'))
        const base = baseLayerEntries(platform, await readDebs(fetched[i]!.debs), [runtime.node, koffi])
        const {native, shared} = await appLayerEntries(app)
        const debs = fetched[i]!.debs.map((p) => `${p.name} ${p.version}`).join(', ')
        const layers: LayerBlob[] = []
        for (const [entries, layerTime, description] of [
          [base.entries, base.mtime, `Debian 12 shared libraries for Node and koffi (${debs}), /etc/passwd with nonroot 65532, /tmp`],
          [nodeLayerEntries(runtime), runtime.mtime, `Node.js ${imageNodeVersion} (npm node-linux-${platform.node})`],
          [shared, mtime, `nfdctl ${source.version} and its production dependencies (package-lock.json)`],
          [native, mtime, `koffi's native module for linux_${platform.node}`],
        ] as const) {
          layers.push(await writeLayer(entries, {blobDir, clamp: mtime, description, mtime: layerTime}))
        }
        log(`image: ${platformName(platform)} layers ${layers.map((l) => `${l.digest.slice(7, 19)} ${(l.size / 1e6).toFixed(1)} MB`).join(', ')}`)
        return {entrypoint: await cliEntrypoint(app), layers, platform}
      }),
    )

    await mkdir(outDir, {recursive: true})
    const archive = join(outDir, `nfdctl-${source.version}-${source.commit.slice(0, 12)}.oci.tar`)
    const written = await writeOciArchive({
      archive,
      blobDir,
      images,
      metadata: {created, description: source.description, licenses: source.license, revision: source.commit, source: defaultSource, title: 'nfdctl', version: source.version},
      mtime,
      ref,
    })
    log(`image: index ${written.index.digest} in ${archive}`)
    return {
      archive,
      commit: source.commit,
      created,
      indexDigest: written.index.digest,
      nodeVersion: `v${imageNodeVersion}`,
      platforms: written.platforms.map((p) => ({
        architecture: p.platform.architecture,
        compressedSize: p.layers.reduce((sum, l) => sum + l.size, 0) + p.config.size,
        configDigest: p.config.digest,
        entrypoint: p.entrypoint,
        layers: p.layers.map(({description, diffId, digest, size, uncompressedSize}) => ({description, diffId, digest, size, uncompressedSize})),
        manifestDigest: p.manifest.digest,
        platform: platformName(p.platform),
        uncompressedSize: p.layers.reduce((sum, l) => sum + l.uncompressedSize, 0),
      })),
      ref,
      version: source.version,
    }
  } finally {
    await rm(stage, {force: true, recursive: true})
  }
}

/**
 * Downloads what a build needs and builds nothing: the Node runtimes and Debian packages into the image
 * cache, each platform's native npm packages into npm's cache. A build afterwards needs no network, as
 * inside the tests' network namespace.
 */
export async function fetchImageInputs(options: Pick<BuildImageOptions, 'architectures' | 'cacheDir' | 'log' | 'refreshDebian' | 'repo'> = {}): Promise<void> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const cacheDir = options.cacheDir ?? imageCacheDir()
  const chosen = (options.architectures ?? allArchitectures).map((arch) => platforms[arch])
  await fetchDebianPackages(await lockedDebianPackages(chosen, {cacheDir, log, refresh: options.refreshDebian}), {cacheDir, log})
  for (const platform of chosen) await fetchNodeRuntime(platform, {cacheDir, log})
  await cachePlatformPackages(resolve(options.repo ?? repoRoot), chosen, log)
  log(`image: inputs for ${chosen.map(platformName).join(', ')} are in ${cacheDir} and npm's cache`)
}
