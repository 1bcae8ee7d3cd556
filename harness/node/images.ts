import {createHash} from 'node:crypto'
import {execFile} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import {promisify} from 'node:util'

import {pack, type Header} from 'tar-stream'

/** The one image the node harness runs: busybox-static, also used as the pod sandbox (pause) image. */
export const busyboxImage = 'localhost/nfdctl-test/busybox:1'

const busyboxBinary = '/bin/busybox'

/**
 * An OCI image layout as a tar (what `ctr images import` takes), built from Debian's busybox-static: no
 * registry, nothing pulled. Its entrypoint sleeps, so that as the sandbox image it does what pause does
 * (containerd stops sandboxes with SIGKILL); pods give their containers a command.
 */
export async function buildBusyboxImage(path: string, ref = busyboxImage): Promise<void> {
  const busybox = await readFile(busyboxBinary).catch((error: unknown) => {
    throw new Error(`${busyboxBinary} is missing: apt-get install busybox-static (${(error as Error).message})`)
  })
  const {stdout} = await promisify(execFile)(busyboxBinary, ['--list'])
  const applets = stdout.split('\n').filter((a) => a !== '' && a !== 'busybox')
  const layer = await tarOf((t) => {
    for (const dir of ['bin', 'dev', 'etc', 'proc', 'root', 'run', 'sys', 'tmp', 'var']) t.entry({mode: dir === 'tmp' ? 0o1777 : 0o755, name: dir, type: 'directory'})
    t.entry({mode: 0o755, name: 'bin/busybox'}, busybox)
    for (const applet of applets) t.entry({linkname: 'busybox', name: `bin/${applet}`, type: 'symlink'})
    t.entry({name: 'etc/passwd'}, 'root:x:0:0:root:/root:/bin/sh\n')
    t.entry({name: 'etc/group'}, 'root:x:0:\n')
  })
  const config = json({
    architecture: 'amd64',
    config: {Entrypoint: ['/bin/sleep', '2147483647'], Env: ['PATH=/bin'], WorkingDir: '/'},
    created: '2026-01-01T00:00:00Z',
    os: 'linux',
    rootfs: {diff_ids: [digest(layer)], type: 'layers'},
  })
  const manifest = json({
    config: {digest: digest(config), mediaType: 'application/vnd.oci.image.config.v1+json', size: config.length},
    layers: [{digest: digest(layer), mediaType: 'application/vnd.oci.image.layer.v1.tar', size: layer.length}],
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    schemaVersion: 2,
  })
  const index = json({
    manifests: [
      {
        annotations: {'io.containerd.image.name': ref, 'org.opencontainers.image.ref.name': ref},
        digest: digest(manifest),
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        platform: {architecture: 'amd64', os: 'linux'},
        size: manifest.length,
      },
    ],
    mediaType: 'application/vnd.oci.image.index.v1+json',
    schemaVersion: 2,
  })
  const layout = await tarOf((t) => {
    t.entry({name: 'oci-layout'}, json({imageLayoutVersion: '1.0.0'}))
    t.entry({name: 'index.json'}, index)
    for (const blob of [layer, config, manifest]) t.entry({name: `blobs/sha256/${digest(blob).slice('sha256:'.length)}`}, blob)
  })
  await writeFile(path, layout)
}

type Add = (header: Partial<Header> & Pick<Header, 'name'>, body?: Buffer | string) => void

async function tarOf(fill: (t: {entry: Add}) => void): Promise<Buffer> {
  const t = pack()
  const chunks: Buffer[] = []
  t.on('data', (chunk: unknown) => void chunks.push(chunk as Buffer))
  const done = new Promise<void>((resolve, reject) => {
    t.on('end', resolve)
    t.on('error', reject)
  })
  fill({entry: (header, body = '') => void t.entry({...header, mtime: new Date(0)}, body)})
  t.finalize()
  await done
  return Buffer.concat(chunks)
}

// Fixed mtimes and key order: the same busybox gives the same image digest, run after run.
const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value))
const digest = (data: Buffer): string => `sha256:${createHash('sha256').update(data).digest('hex')}`
