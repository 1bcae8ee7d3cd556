// Reading the image archive `npm run image` writes, and running its amd64 image without a container
// runtime: its layers unpacked as a root file system, entered with unshare(1) as the image's user.
import {execFile} from 'node:child_process'
import {mkdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {type RunResult, runToEnd} from './process/run-to-end.js'

const run = promisify(execFile)

export interface Descriptor {
  mediaType: string
  digest: string
  size: number
  platform?: {architecture: string; os: string; variant?: string}
  annotations?: Record<string, string>
}

export interface ImageManifest {
  config: Descriptor
  layers: Descriptor[]
}

export interface ImageConfig {
  architecture: string
  os: string
  config: {User: string; Entrypoint: string[]; Env: string[]; WorkingDir: string; Labels: Record<string, string>}
  rootfs: {diff_ids: string[]}
}

/** An oci-archive unpacked (`tar -x`): oci-layout, index.json and blobs/sha256/. */
export class OciLayout {
  private constructor(readonly dir: string) {}

  static async extract(archive: string, dir: string): Promise<OciLayout> {
    await mkdir(dir, {recursive: true})
    await run('tar', ['-xf', archive, '-C', dir])
    return new OciLayout(dir)
  }

  blobPath(digest: string): string {
    return join(this.dir, 'blobs', 'sha256', digest.replace(/^sha256:/, ''))
  }

  async json<T>(digest: string): Promise<T> {
    return JSON.parse(await readFile(this.blobPath(digest), 'utf8')) as T
  }

  /** The multi-platform index index.json points at. */
  async index(): Promise<{digest: string; manifests: Descriptor[]; annotations: Record<string, string>}> {
    const top = JSON.parse(await readFile(join(this.dir, 'index.json'), 'utf8')) as {manifests: Descriptor[]}
    const digest = top.manifests[0]!.digest
    return {...(await this.json<{manifests: Descriptor[]; annotations: Record<string, string>}>(digest)), digest}
  }

  async platform(architecture: string): Promise<{manifest: ImageManifest; config: ImageConfig; configSize: number}> {
    const descriptor = (await this.index()).manifests.find((m) => m.platform?.architecture === architecture)
    if (descriptor === undefined) throw new Error(`the image has no ${architecture} manifest`)
    const manifest = await this.json<ImageManifest>(descriptor.digest)
    return {config: await this.json<ImageConfig>(manifest.config.digest), configSize: manifest.config.size, manifest}
  }

  /** The platform's layers extracted in order into `rootfs`, owners kept (root is needed for 65532's home). */
  async unpack(manifest: ImageManifest, rootfs: string): Promise<void> {
    await mkdir(rootfs, {recursive: true})
    for (const layer of manifest.layers) await run('tar', ['-xzf', this.blobPath(layer.digest), '-C', rootfs, '--same-owner', '--numeric-owner'])
    // The mount point a runtime creates: the new PID namespace's proc goes there.
    await mkdir(join(rootfs, 'proc'), {recursive: true})
  }
}

/** What a command run in the image printed, its exit code, and the time from spawning unshare to its exit. */
export type InImageRun = RunResult

/**
 * Runs the image's entry point (or `entrypoint` instead) with `args` as a container runtime would: its
 * root file system, new mount, PID, network, IPC and UTS namespaces, the config's user and group (no other
 * groups), working directory and environment (HOME from /etc/passwd). Needs root.
 */
export function runInImage(rootfs: string, config: ImageConfig, args: readonly string[], entrypoint: readonly string[] = config.config.Entrypoint): Promise<InImageRun> {
  const [uid, gid] = config.config.User.split(':')
  const env = Object.fromEntries(config.config.Env.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
  const unshare = ['--mount', '--pid', '--net', '--ipc', '--uts', '--fork', '--mount-proc', `--root=${rootfs}`, `--wd=${config.config.WorkingDir}`, '--setuid', uid!, '--setgid', gid!, '--']
  return runToEnd('unshare', [...unshare, ...entrypoint, ...args], {env: {HOME: '/home/nonroot', ...env}})
}
