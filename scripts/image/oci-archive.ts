import {createHash} from 'node:crypto'
import {createReadStream, createWriteStream} from 'node:fs'
import {rename, rm, stat, writeFile} from 'node:fs/promises'
import {basename, join} from 'node:path'
import {pipeline} from 'node:stream/promises'

import {pack} from 'tar-stream'

import type {LayerBlob} from './layer.js'
import type {Platform} from './platforms.js'

export const mediaTypes = {
  config: 'application/vnd.oci.image.config.v1+json',
  index: 'application/vnd.oci.image.index.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
} as const

/** What the labels and annotations say about the image (org.opencontainers.image.*). */
export interface ImageMetadata {
  readonly version: string
  /** The commit it was built from. */
  readonly revision: string
  readonly source: string
  /** The commit time, RFC 3339. */
  readonly created: string
  readonly title: string
  readonly description: string
  readonly licenses: string
}

/** One platform's image, before its config and manifest are written. */
export interface PlatformImage {
  readonly platform: Platform
  readonly layers: readonly LayerBlob[]
  readonly entrypoint: readonly string[]
}

export interface Descriptor {
  readonly mediaType: string
  readonly digest: string
  readonly size: number
}

export interface WrittenPlatform extends PlatformImage {
  readonly manifest: Descriptor
  readonly config: Descriptor
}

/** The user every platform's image runs as by default (distroless's nonroot): /etc/passwd names it. */
export const imageUser = '65532:65532'

/**
 * The config and manifest of each platform, the image index over them, and the OCI layout around it,
 * written as one tar (an oci-archive) to `archive`. The top-level index.json names the image index with
 * `io.containerd.image.name` (what `ctr images import` calls it) and `org.opencontainers.image.ref.name`.
 * Every JSON document is serialised with its keys in a fixed order, and the tar's entries sorted with one
 * mtime, so the same layers give the same digests and the same archive bytes.
 */
export async function writeOciArchive(options: {
  images: readonly PlatformImage[]
  metadata: ImageMetadata
  ref: string
  blobDir: string
  archive: string
  mtime: Date
}): Promise<{index: Descriptor; platforms: WrittenPlatform[]}> {
  const {metadata} = options
  const annotations = {
    'org.opencontainers.image.created': metadata.created,
    'org.opencontainers.image.description': metadata.description,
    'org.opencontainers.image.licenses': metadata.licenses,
    'org.opencontainers.image.revision': metadata.revision,
    'org.opencontainers.image.source': metadata.source,
    'org.opencontainers.image.title': metadata.title,
    'org.opencontainers.image.version': metadata.version,
  }
  const blobs = new Map<string, string>()
  const putJson = async (mediaType: string, value: unknown): Promise<Descriptor> => {
    const data = Buffer.from(JSON.stringify(value))
    const hex = createHash('sha256').update(data).digest('hex')
    const path = join(options.blobDir, hex)
    await writeFile(path, data)
    blobs.set(hex, path)
    return {digest: `sha256:${hex}`, mediaType, size: data.length}
  }
  const platforms: WrittenPlatform[] = []
  for (const image of options.images) {
    for (const layer of image.layers) blobs.set(layer.digest.slice('sha256:'.length), layer.path)
    const config = await putJson(mediaTypes.config, {
      architecture: image.platform.architecture,
      ...(image.platform.variant === undefined ? {} : {variant: image.platform.variant}),
      os: 'linux',
      created: metadata.created,
      config: {
        User: imageUser,
        Env: ['PATH=/usr/local/bin:/usr/bin:/bin'],
        Entrypoint: image.entrypoint,
        WorkingDir: '/',
        Labels: annotations,
      },
      rootfs: {type: 'layers', diff_ids: image.layers.map((layer) => layer.diffId)},
      history: image.layers.map((layer) => ({created: metadata.created, created_by: `npm run image: ${layer.description}`})),
    })
    const manifest = await putJson(mediaTypes.manifest, {
      schemaVersion: 2,
      mediaType: mediaTypes.manifest,
      config,
      layers: image.layers.map((layer) => ({mediaType: mediaTypes.layer, digest: layer.digest, size: layer.size})),
      annotations,
    })
    platforms.push({...image, config, manifest})
  }
  const index = await putJson(mediaTypes.index, {
    schemaVersion: 2,
    mediaType: mediaTypes.index,
    manifests: platforms.map((p) => ({
      ...p.manifest,
      platform: {architecture: p.platform.architecture, os: 'linux', ...(p.platform.variant === undefined ? {} : {variant: p.platform.variant})},
    })),
    annotations,
  })
  const top = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: mediaTypes.index,
      manifests: [{...index, annotations: {'io.containerd.image.name': options.ref, 'org.opencontainers.image.ref.name': options.ref}}],
    }),
  )
  await writeLayoutTar(options.archive, blobs, top, options.mtime)
  return {index, platforms}
}

async function writeLayoutTar(archive: string, blobs: ReadonlyMap<string, string>, indexJson: Buffer, mtime: Date): Promise<void> {
  const partial = join(archive, '..', `.${basename(archive)}.${process.pid}.partial`)
  const tar = pack()
  const written = pipeline(tar, createWriteStream(partial))
  const header = {gid: 0, gname: '', mtime, uid: 0, uname: ''}
  const dir = (name: string): Promise<void> => new Promise((resolve, reject) => tar.entry({...header, mode: 0o755, name, type: 'directory'}, (e) => (e ? reject(e) : resolve())))
  const file = (name: string, body: Buffer): Promise<void> => new Promise((resolve, reject) => tar.entry({...header, mode: 0o644, name, size: body.length}, body, (e) => (e ? reject(e) : resolve())))
  try {
    await dir('blobs/')
    await dir('blobs/sha256/')
    for (const hex of [...blobs.keys()].sort()) {
      const path = blobs.get(hex)!
      const {size} = await stat(path)
      await new Promise<void>((resolve, reject) => {
        const sink = tar.entry({...header, mode: 0o644, name: `blobs/sha256/${hex}`, size}, (e) => (e ? reject(e) : resolve()))
        createReadStream(path).on('error', reject).pipe(sink)
      })
    }
    await file('index.json', indexJson)
    await file('oci-layout', Buffer.from(JSON.stringify({imageLayoutVersion: '1.0.0'})))
    tar.finalize()
    await written
    await rename(partial, archive)
  } finally {
    await rm(partial, {force: true})
  }
}
