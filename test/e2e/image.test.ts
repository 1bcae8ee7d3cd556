import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {createHash} from 'node:crypto'
import {createReadStream} from 'node:fs'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join, posix} from 'node:path'
import {promisify} from 'node:util'
import {createGunzip} from 'node:zlib'

import {extract} from 'tar-stream'

import {type Descriptor, type ImageConfig, type ImageManifest, OciLayout, runInImage} from '../../harness/oci-image.js'
import {buildImage, type BuiltImage} from '../../scripts/image/build.js'
import {elfMachine, isElf, readElf} from '../../scripts/image/elf.js'
import {imageNodeVersion} from '../../scripts/image/node-runtime.js'
import {platforms, type Platform} from '../../scripts/image/platforms.js'
import {productionDifferences} from '../../scripts/image/production-deps.js'
import {builtImage} from '../support/nfdctl-image.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const run = promisify(execFile)
const repo = new URL('../..', import.meta.url).pathname

interface LayerFile {
  type: string
  mode: number
  uid: number
  gid: number
  linkname?: string
  /** Only for the files a check reads (ELF files, package.json). */
  data?: Buffer
}

/** Every entry of a gzip layer by path, with the content of those `keep` picks; also the tar's own digest. */
async function readLayer(path: string, keep: (name: string) => boolean): Promise<{files: Map<string, LayerFile>; diffId: string}> {
  const files = new Map<string, LayerFile>()
  const hash = createHash('sha256')
  const reader = extract()
  const gunzip = createGunzip()
  gunzip.on('data', (chunk: Buffer) => hash.update(chunk))
  createReadStream(path).pipe(gunzip).pipe(reader)
  for await (const entry of reader) {
    const name = entry.header.name.replace(/\/$/, '')
    const chunks: Buffer[] = []
    for await (const chunk of entry) if (keep(name)) chunks.push(chunk as Buffer)
    const {gid, linkname, mode, type, uid} = entry.header
    files.set(name, {data: keep(name) ? Buffer.concat(chunks) : undefined, gid, linkname: linkname ?? undefined, mode, type, uid})
  }
  return {diffId: `sha256:${hash.digest('hex')}`, files}
}

const keepForChecks = (name: string): boolean => name === 'usr/local/bin/node' || name.endsWith('.node') || name.endsWith('/package.json') || /\.so(\.\d+)*$/.test(name)

/** One platform's image: its manifest, config and the union of its layers' files (later layers win). */
interface PlatformView {
  platform: Platform
  manifest: ImageManifest
  config: ImageConfig
  files: Map<string, LayerFile>
  diffIds: string[]
}

describe('the image (npm run image): an OCI archive for linux/amd64 and linux/arm64', function () {
  let image: BuiltImage
  let layout: OciLayout
  let index: {manifests: Descriptor[]; annotations: Record<string, string>}
  const views = new Map<string, PlatformView>()
  let work: string

  before(async function () {
    this.timeout(20 * 60_000)
    image = await builtImage(this)
    work = await mkdtemp(join(tmpdir(), 'nfdctl-image-test-'))
    layout = await OciLayout.extract(image.archive, join(work, 'layout'))
    index = await layout.json(image.indexDigest)
    for (const descriptor of index.manifests) {
      const platform = platforms[descriptor.platform!.architecture as Platform['architecture']]
      const manifest = await layout.json<ImageManifest>(descriptor.digest)
      const files = new Map<string, LayerFile>()
      const diffIds: string[] = []
      for (const layer of manifest.layers) {
        const read = await readLayer(layout.blobPath(layer.digest), keepForChecks)
        diffIds.push(read.diffId)
        for (const [name, file] of read.files) files.set(name, file)
      }
      views.set(platform.architecture, {config: await layout.json(manifest.config.digest), diffIds, files, manifest, platform})
    }
  })

  after(async function () {
    if (work) await rm(work, {force: true, recursive: true})
  })

  it('is an OCI layout whose index.json names the image as containerd and skopeo read it', async function () {
    const version = (JSON.parse(await readFile(join(repo, 'package.json'), 'utf8')) as {version: string}).version
    expect(image.ref).to.equal(`ghcr.io/nfdctl/nfdctl:${version}`)
    expect(JSON.parse(await readFile(join(layout.dir, 'oci-layout'), 'utf8'))).to.deep.equal({imageLayoutVersion: '1.0.0'})
    const top = JSON.parse(await readFile(join(layout.dir, 'index.json'), 'utf8')) as {manifests: Descriptor[]}
    expect(top.manifests).to.have.length(1)
    expect(top.manifests[0]).to.deep.include({digest: image.indexDigest, mediaType: 'application/vnd.oci.image.index.v1+json'})
    expect(top.manifests[0]!.annotations).to.deep.equal({'io.containerd.image.name': image.ref, 'org.opencontainers.image.ref.name': image.ref})
    expect(image.archive.startsWith('/')).to.equal(true)
  })

  it('its index holds exactly linux/amd64 and linux/arm64/v8, annotated with version, commit, source and time', function () {
    expect(index.manifests.map((m) => m.platform)).to.have.deep.members([
      {architecture: 'amd64', os: 'linux'},
      {architecture: 'arm64', os: 'linux', variant: 'v8'},
    ])
    expect(index.manifests.every((m) => m.mediaType === 'application/vnd.oci.image.manifest.v1+json')).to.equal(true)
    expect(index.annotations).to.include({
      'org.opencontainers.image.created': image.created,
      'org.opencontainers.image.revision': image.commit,
      'org.opencontainers.image.source': 'https://github.com/nfdctl/nfdctl',
      'org.opencontainers.image.version': image.version,
    })
    expect(image.commit).to.match(/^[0-9a-f]{40}$/)
  })

  it('every blob hashes to its name and size, and each layer unpacks to the diff_id its config lists', async function () {
    const {stdout} = await run('find', [join(layout.dir, 'blobs', 'sha256'), '-type', 'f'])
    for (const path of stdout.trim().split('\n')) {
      const hash = createHash('sha256')
      for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
      expect(hash.digest('hex'), path).to.equal(posix.basename(path))
    }
    for (const view of views.values()) {
      for (const layer of view.manifest.layers) expect((await readFile(layout.blobPath(layer.digest))).length).to.equal(layer.size)
      expect(view.config.rootfs.diff_ids).to.deep.equal(view.diffIds)
      expect(view.config.architecture).to.equal(view.platform.architecture)
    }
  })

  for (const architecture of ['amd64', 'arm64'] as const) {
    const platform = platforms[architecture]

    it(`${architecture}: node and every native module are ELF for machine ${platform.elfMachine}, koffi's only for glibc on this CPU`, function () {
      const {files} = views.get(architecture)!
      expect(elfMachine(files.get('usr/local/bin/node')!.data!)).to.equal(platform.elfMachine)
      const natives = [...files].filter(([name]) => name.endsWith('.node'))
      expect(natives.map(([name]) => name)).to.deep.equal([`usr/local/lib/nfdctl/node_modules/@koromix/koffi-linux-${platform.node}/linux_${platform.node}/koffi.node`])
      for (const [name, file] of natives) expect(elfMachine(file.data!), name).to.equal(platform.elfMachine)
    })

    it(`${architecture}: every shared library node and koffi need is there, for the same machine`, function () {
      const {files} = views.get(architecture)!
      const resolve = (path: string): LayerFile | undefined => {
        for (let hops = 0, at = path; hops < 10; hops++) {
          const file = files.get(at.replace(/^\//, ''))
          if (file?.type !== 'symlink') return file
          at = file.linkname!.startsWith('/') ? file.linkname! : posix.join(posix.dirname(at), file.linkname!)
        }
        return undefined
      }
      const pending = ['/usr/local/bin/node', `/usr/local/lib/nfdctl/node_modules/@koromix/koffi-linux-${platform.node}/linux_${platform.node}/koffi.node`]
      const seen = new Set<string>()
      while (pending.length > 0) {
        const path = pending.shift()!
        if (seen.has(path)) continue
        seen.add(path)
        const file = resolve(path)
        expect(file?.data, `${path} in the image`).to.not.equal(undefined)
        const elf = readElf(file!.data!)
        expect(elf.machine, path).to.equal(platform.elfMachine)
        if (elf.interpreter !== undefined) pending.push(elf.interpreter)
        for (const soname of elf.needed) {
          const found = [`/lib/${platform.triplet}`, `/usr/lib/${platform.triplet}`].map((dir) => `${dir}/${soname}`).find((candidate) => resolve(candidate) !== undefined)
          expect(found, `${soname}, needed by ${path}`).to.not.equal(undefined)
          pending.push(found!)
        }
      }
      expect([...seen].map((path) => posix.basename(path))).to.include.members(['libc.so.6', 'libstdc++.so.6', 'libgcc_s.so.1', 'libatomic.so.1'])
    })

    it(`${architecture}: no shell, no npm, no package manager or coreutils; nothing executable but node and libraries`, function () {
      const {files} = views.get(architecture)!
      const names = [...files.keys()]
      for (const forbidden of [/(^|\/)s?bin\/(sh|bash|dash|busybox|ls|cat|env)$/, /(^|\/)(npm|npx|corepack|dpkg|apt|apt-get)$/, /node_modules\/(npm|corepack)(\/|$)/]) {
        expect(
          names.filter((name) => forbidden.test(name)),
          String(forbidden),
        ).to.deep.equal([])
      }
      expect(files.has('bin/sh')).to.equal(false)
      const executables = [...files].filter(([name, file]) => file.type === 'file' && (file.mode & 0o111) !== 0 && !name.startsWith('usr/local/lib/nfdctl/'))
      for (const [name, file] of executables) expect(file.data !== undefined && isElf(file.data), `${name} is executable`).to.equal(true)
    })

    it(`${architecture}: runs node with bin/run.js's flags as 65532:65532 in /; only what 65532 needs is its own`, function () {
      const {config, files} = views.get(architecture)!
      expect(config.config.User).to.equal('65532:65532')
      expect(config.config.WorkingDir).to.equal('/')
      expect(config.config.Entrypoint).to.deep.equal(['/usr/local/bin/node', '--max-semi-space-size=4', '/usr/local/lib/nfdctl/bin/run.js'])
      expect(files.has('usr/local/lib/nfdctl/bin/run.js')).to.equal(true)
      expect(config.config.Labels).to.include({'org.opencontainers.image.revision': image.commit, 'org.opencontainers.image.version': image.version})
      const owned = [...files].filter(([, file]) => file.uid !== 0 || file.gid !== 0)
      expect(owned.map(([name, file]) => `${name} ${file.uid}:${file.gid}`)).to.deep.equal(['home/nonroot 65532:65532'])
      expect(files.get('tmp')?.mode).to.equal(0o1777)
    })

    it(`${architecture}: its production dependencies are exactly package-lock.json's for linux/${platform.node}`, async function () {
      const {files} = views.get(architecture)!
      const installed = new Map<string, string>()
      const prefix = 'usr/local/lib/nfdctl/'
      for (const [name, file] of files) {
        const match = /^(.*node_modules\/(@[^/]+\/)?[^/@][^/]*)\/package\.json$/.exec(name.slice(prefix.length))
        if (name.startsWith(prefix) && match !== null) installed.set(match[1]!, (JSON.parse(file.data!.toString()) as {version: string}).version)
      }
      const lock = JSON.parse(await run('git', ['-C', repo, 'show', `${image.commit}:package-lock.json`], {maxBuffer: 64 * 1024 * 1024}).then((r) => r.stdout)) as {packages: Record<string, object>}
      expect(productionDifferences(lock.packages, installed, platform)).to.deep.equal([])
      expect(installed.size).to.be.greaterThan(50)
    })
  }

  it('the CLI layer is one blob, shared by both platforms', function () {
    const amd64 = views.get('amd64')!.manifest.layers.map((l) => l.digest)
    const arm64 = views.get('arm64')!.manifest.layers.map((l) => l.digest)
    expect(amd64.filter((digest) => arm64.includes(digest))).to.have.length(1)
    expect(amd64[2]).to.equal(arm64[2])
  })

  it('a second build of the same commit gives the same index digest, the same archive bytes', async function () {
    this.timeout(15 * 60_000)
    const again = await buildImage({commit: image.commit, log: () => {}, outDir: join(work, 'again')})
    expect(again.indexDigest).to.equal(image.indexDigest)
    const digest = async (path: string): Promise<string> => (await run('sha256sum', [path])).stdout.split(' ')[0]!
    expect(await digest(again.archive)).to.equal(await digest(image.archive))
  })

  describe('amd64, run as the image says: its layers as a root file system, a new mount, PID, network and IPC namespace, user 65532', function () {
    let rootfs: string
    let config: ImageConfig

    before(async function () {
      this.timeout(5 * 60_000)
      if (process.getuid?.() !== 0) missingPrerequisite(this, 'running the image (chroot, setuid to 65532) needs root')
      await run('unshare', ['--version']).catch(() => missingPrerequisite(this, 'unshare (util-linux) is missing'))
      const view = views.get('amd64')!
      config = view.config
      rootfs = join(work, 'rootfs')
      await layout.unpack(view.manifest, rootfs)
    })

    const inImage = (args: readonly string[], entrypoint?: readonly string[]) => runInImage(rootfs, config, args, entrypoint)

    it('nfdctl version prints the image version, its commit, its Node and linux/amd64', async function () {
      const text = await inImage(['version'])
      expect(text.code, text.stderr).to.equal(0)
      expect(text.stdout.trimEnd().split('\n')).to.deep.equal([`version:  ${image.version}`, `commit:   ${image.commit}`, `node:     v${imageNodeVersion}`, 'platform: linux/amd64'])
      const json = await inImage(['version', '-o', 'json'])
      expect(JSON.parse(json.stdout)).to.deep.equal({commit: image.commit, node: image.nodeVersion, platform: 'linux/amd64', version: image.version})
    })

    it('nfdctl --help lists the commands, autocomplete and version among them', async function () {
      const help = await inImage(['--help'])
      expect(help.code, help.stderr).to.equal(0)
      expect(help.stdout).to.include(`nfdctl/${image.version} linux-x64 node-v${imageNodeVersion}`)
      for (const command of ['autocomplete', 'devices', 'gc', 'plugins', 'version']) expect(help.stdout).to.match(new RegExp(`^  ${command} `, 'm'))
    })

    it('the process is PID 1, user and group 65532 with no other group, and finds no shell', async function () {
      const probe =
        "const fs = require('node:fs'); console.log(JSON.stringify({uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), sh: fs.existsSync('/bin/sh'), pid: process.pid}))"
      const result = await inImage(['-e', probe], ['/usr/local/bin/node'])
      expect(result.code, result.stderr).to.equal(0)
      expect(JSON.parse(result.stdout)).to.deep.equal({gid: 65532, groups: [65532], pid: 1, sh: false, uid: 65532})
    })
  })
})
