import {expect} from 'chai'
import {execFile, spawn} from 'node:child_process'
import {lstat, mkdir, mkdtemp, readdir, rm, stat} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {createDeviceNode, removeDeviceNode} from '../../src/lib/sys/device-nodes.js'
import {closeRoot, openRoot, PathInsideError, type RootDir} from '../../src/lib/sys/path-inside.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const run = promisify(execFile)

interface MountNamespace {
  readonly pid: number
  stop(): Promise<void>
}

/**
 * A process in a mount namespace of its own (as a container's init is) after `script` has mounted what it
 * likes there: the test reaches that view through /proc/<pid>/root, as the agent reaches a container's.
 */
async function inMountNamespace(script: string): Promise<MountNamespace> {
  const child = spawn('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-ec', `${script}\necho ready\nexec sleep 3600`], {stdio: ['ignore', 'pipe', 'pipe']})
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve())
    void exited.then(() => reject(new Error(`the mount namespace's script failed: ${stderr.trim()}`)))
  })
  return {
    pid: child.pid!,
    async stop() {
      child.kill('SIGKILL')
      await exited
    },
  }
}

const isEmpty = async (dir: string): Promise<boolean> => (await readdir(dir)).length === 0
const exists = async (path: string): Promise<boolean> =>
  lstat(path).then(
    () => true,
    () => false,
  )

describe("device nodes under a container's /dev: never into another mount, never through a symlink (real kernel, mount namespaces)", function () {
  let base: string
  /** The container's root directory, as the host sees it (its /dev tmpfs and volumes are in the namespace only). */
  let root: string
  /** A host directory the "container" has as a volume at /dev/input. */
  let volume: string
  let namespace: MountNamespace | undefined
  const node = {gid: 5, major: 1, minor: 3, mode: 0o640, path: '/dev/serial/by-id/usb-x', type: 'char' as const, uid: 1234}

  before(async function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'mount namespaces and mknod need root')
    await run('unshare', ['--version']).catch(() => missingPrerequisite(this, 'unshare (util-linux) is not installed'))
  })

  beforeEach(async function () {
    base = await mkdtemp(join(tmpdir(), 'nfdctl-mounts-'))
    root = join(base, 'root')
    volume = join(base, 'volume')
    await mkdir(join(root, 'dev'), {recursive: true})
    await mkdir(volume)
  })

  afterEach(async function () {
    await namespace?.stop()
    namespace = undefined
    await rm(base, {force: true, recursive: true})
  })

  /** A container-like root: runc's tmpfs at /dev, a host directory bound at /dev/input, a symlink /dev/x -> /etc. */
  const startContainerLike = async (): Promise<string> => {
    namespace = await inMountNamespace(
      [
        `mount -t tmpfs -o mode=755 tmpfs ${root}/dev`,
        `mkdir ${root}/dev/input`,
        `mount --bind ${volume} ${root}/dev/input`,
        `ln -s /etc ${root}/dev/x`,
        `touch ${root}/dev/termination-log ${base}/log`,
        `mount --bind ${base}/log ${root}/dev/termination-log`,
      ].join('\n'),
    )
    return `/proc/${namespace.pid}/root${root}`
  }

  for (const openat2 of [true, false]) {
    const how = openat2 ? 'openat2' : 'openat and mount ids (no openat2)'
    const open = (path: string): RootDir => openRoot(path, {openat2})
    const withRoot = <T>(path: string, work: (r: RootDir) => T): T => {
      const r = open(path)
      try {
        return work(r)
      } finally {
        closeRoot(r)
      }
    }

    it(`${how}: the normal case makes the node on the container's tmpfs with its mode and owner, and removes it`, async function () {
      const view = await startContainerLike()
      withRoot(view, (r) => {
        expect(r.openat2).to.equal(openat2)
        expect(createDeviceNode(r, node)).to.equal(true)
        expect(createDeviceNode(r, node)).to.equal(false) // already there as asked
      })
      const made = await stat(join(view, node.path))
      expect(made.isCharacterDevice()).to.equal(true)
      expect([made.mode & 0o7777, made.uid, made.gid, Math.floor(made.rdev / 256), made.rdev % 256]).to.deep.equal([0o640, 1234, 5, 1, 3])
      expect(await exists(join(root, node.path)), 'nothing on the host beneath the tmpfs').to.equal(false)
      expect(withRoot(view, (r) => removeDeviceNode(r, node.path, 1, 3))).to.equal(true)
      expect(await exists(join(view, node.path))).to.equal(false)
    })

    it(`${how}: a volume at /dev/input gets nothing, and nothing in it is removed`, async function () {
      const view = await startContainerLike()
      const event9 = {...node, mode: 0o666, path: '/dev/input/event9'}
      expect(() => withRoot(view, (r) => createDeviceNode(r, event9))).to.throw(
        PathInsideError,
        /\/dev\/input in .* is another mount \(a volume\?\), not the container's \/dev; nothing is written there/,
      )
      expect(await isEmpty(volume), 'the host directory stays empty').to.equal(true)
      // A parent created on the way would be inside the volume as well.
      expect(() => withRoot(view, (r) => createDeviceNode(r, {...event9, path: '/dev/input/by-id/kbd'}))).to.throw(PathInsideError, /another mount/)
      expect(await isEmpty(volume)).to.equal(true)
      // A node of those numbers in the volume is not the agent's: removal leaves it.
      await run('mknod', [join(volume, 'event9'), 'c', '1', '3'])
      expect(withRoot(view, (r) => removeDeviceNode(r, '/dev/input/event9', 1, 3))).to.equal(false)
      expect(await readdir(volume)).to.deep.equal(['event9'])
      // A file bound onto the node's own name is a mount too.
      expect(() => withRoot(view, (r) => createDeviceNode(r, {...node, path: '/dev/termination-log'}))).to.throw(PathInsideError, /is a mount point \(a volume\?\); nothing is written there/)
      expect(withRoot(view, (r) => removeDeviceNode(r, '/dev/termination-log', 1, 3))).to.equal(false)
      expect((await stat(join(base, 'log'))).isFile()).to.equal(true)
    })

    it(`${how}: a symlink /dev/x -> /etc is not followed`, async function () {
      const view = await startContainerLike()
      expect(() => withRoot(view, (r) => createDeviceNode(r, {...node, path: '/dev/x/nfdctl-evil'}))).to.throw(PathInsideError, /\/dev\/x in .* is not a plain directory .*a symlink is never followed/)
      expect(await exists('/etc/nfdctl-evil')).to.equal(false)
      expect(() => withRoot(view, (r) => createDeviceNode(r, {...node, path: '/dev/x'}))).to.throw(PathInsideError, /exists and is not a device node/)
      expect(withRoot(view, (r) => removeDeviceNode(r, '/dev/x/passwd', 1, 3))).to.equal(false)
      expect(await exists('/etc/passwd')).to.equal(true)
    })

    it(`${how}: a /dev that is not the container's own (a host directory, a host tmpfs, the host's /dev) is refused with nothing written`, async function () {
      const hostTmpfs = join(base, 'host-tmpfs')
      await mkdir(hostTmpfs)
      // A tmpfs the host has mounted (as kubelet mounts a memory emptyDir), bound in as the container's /dev.
      await run('mount', ['-t', 'tmpfs', 'tmpfs', hostTmpfs])
      try {
        const cases = [
          {refusal: /it is a mount of \S+, not a tmpfs/, source: volume},
          {refusal: /its filesystem \(\d+:\d+\) is the host's .*host-tmpfs \(a volume or the host's \/dev\)/, source: hostTmpfs},
          {refusal: /its filesystem \(\d+:\d+\) is the host's \/dev/, source: '/dev'},
        ]
        for (const {refusal, source} of cases) {
          namespace = await inMountNamespace(`mount --bind ${source} ${root}/dev`)
          const view = `/proc/${namespace.pid}/root${root}`
          const spec = {...node, path: '/dev/nfdctl-event9'}
          expect(() => withRoot(view, (r) => createDeviceNode(r, spec)), source)
            .to.throw(PathInsideError, /\/dev in .* is not the container's own: .*; nothing is written there/)
            .with.property('message')
            .match(refusal)
          expect(
            withRoot(view, (r) => removeDeviceNode(r, '/dev/null', 1, 3)),
            source,
          ).to.equal(false)
          await namespace.stop()
          namespace = undefined
        }
        expect(await isEmpty(volume)).to.equal(true)
        expect(await isEmpty(hostTmpfs)).to.equal(true)
        expect(await exists('/dev/nfdctl-event9')).to.equal(false)
        expect((await stat('/dev/null')).isCharacterDevice()).to.equal(true)
      } finally {
        await run('umount', [hostTmpfs])
      }
    })
  }

  it("without a mount namespace: a /dev on the root's own filesystem is the container's (its image's) own", async function () {
    expect(createDeviceNode(root, node)).to.equal(true)
    expect((await stat(join(root, node.path))).isCharacterDevice()).to.equal(true)
    expect(() => createDeviceNode(root, {...node, path: '/etc/passwd'})).to.throw(PathInsideError, /device nodes go under \/dev only/)
  })
})
