import {expect} from 'chai'
import {spawn, type ChildProcess} from 'node:child_process'
import {mkdir, readdir, readFile, rmdir, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {applyAccess, currentAccess} from '../../src/lib/agent/access-applier.js'
import {programAfter} from '../../src/lib/agent/reconcile-plan.js'
import type {Device} from '../../src/lib/devices/types.js'
import {ContainerHandle, ContainerGoneError} from '../../src/lib/runtime/container-handle.js'
import {ContainerdClient, type RuntimeContainer} from '../../src/lib/runtime/containerd-client.js'
import {cgroupOfSpec} from '../../src/lib/runtime/device-cgroup.js'
import {createDeviceNode} from '../../src/lib/sys/device-nodes.js'
import {PathInsideError} from '../../src/lib/sys/path-inside.js'
import {deletePods, waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {testNode} from '../support/test-node.js'

const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length

describe('container handle: one process pinned by a pidfd, its cgroup checked, its root held (real kernel)', function () {
  /** The cgroup hierarchies where device access is decided here: the v1 devices controller and cgroup2. */
  let hierarchies: string[]
  const id = `nfdctl-handle-${process.pid}`
  const parent = `/nfdctl-handle-test-${process.pid}`
  const cgroupsPath = `${parent}/${id}`
  const container: RuntimeContainer = {id, labels: {}, spec: {linux: {cgroupsPath}}}
  const children: ChildProcess[] = []

  /** A sleeping process in the container's cgroup (in every hierarchy), as runc puts a container's init. */
  const startInCgroup = async (): Promise<ChildProcess> => {
    const child = spawn('sleep', ['3600'], {stdio: 'ignore'})
    children.push(child)
    await new Promise((resolve, reject) => child.once('spawn', resolve).once('error', reject))
    for (const hierarchy of hierarchies) await writeFile(join(hierarchy, cgroupsPath, 'cgroup.procs'), String(child.pid))
    return child
  }
  const exit = async (child: ChildProcess): Promise<void> => {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
  }

  before(async function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'moving a process into a cgroup needs root')
    const mounts = (await readFile('/proc/self/mounts', 'utf8')).split('\n').map((l) => l.split(' '))
    hierarchies = mounts.filter((f) => (f[2] === 'cgroup' && f[3].split(',').includes('devices')) || f[2] === 'cgroup2').map((f) => f[1])
    if (hierarchies.length === 0) missingPrerequisite(this, 'neither a v1 devices cgroup hierarchy nor cgroup2 is mounted')
    for (const hierarchy of hierarchies) await mkdir(join(hierarchy, cgroupsPath), {recursive: true})
  })

  afterEach(async function () {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) await exit(child)
  })

  after(async function () {
    for (const hierarchy of hierarchies ?? []) {
      await rmdir(join(hierarchy, cgroupsPath)).catch(() => {})
      await rmdir(join(hierarchy, parent)).catch(() => {})
    }
  })

  for (const pidfd of [true, false]) {
    const how = pidfd ? 'pidfd' : 'start time (no pidfd_open)'

    it(`${how}: the cgroup from cgroupsPath agrees with /proc; a process that exits is detected as gone`, async function () {
      const child = await startInCgroup()
      const before = await fds()
      const handle = await ContainerHandle.open(container, child.pid!, {pidfd})
      try {
        expect(handle.process.hasPidfd).to.equal(pidfd)
        expect(handle.control.dir.endsWith(cgroupOfSpec(cgroupsPath))).to.equal(true)
        expect(await readFile(`/proc/${child.pid}/cgroup`, 'utf8')).to.include(`:${cgroupsPath}\n`)
        expect((await stat(`/proc/self/fd/${handle.root.fd}`)).ino).to.equal((await stat('/')).ino) // its root: the host's here
        expect(handle.isRunning()).to.equal(true)
        handle.assertRunning()
        await exit(child)
        expect(handle.isRunning()).to.equal(false)
        expect(() => handle.assertRunning()).to.throw(ContainerGoneError, `container ${id}: process ${child.pid} exited while its devices were being changed`)
      } finally {
        handle.close()
        handle.close()
      }
      expect(await fds()).to.equal(before) // pidfd and root fd closed
      // Once it is gone, no handle opens for its PID.
      const error = await ContainerHandle.open(container, child.pid!, {pidfd}).catch((e: Error) => e)
      expect(error)
        .to.be.instanceOf(ContainerGoneError)
        .with.property('message')
        .match(new RegExp(`process ${child.pid} (does not exist any more|exited while)`))
    })

    it(`${how}: a PID whose cgroup is not the container's is refused`, async function () {
      const before = await fds()
      // The test process is not in the container's cgroup: as a reused PID would not be.
      const error = await ContainerHandle.open(container, process.pid, {pidfd}).catch((e: Error) => e)
      expect(error)
        .to.be.instanceOf(ContainerGoneError)
        .with.property('message')
        .match(
          new RegExp(
            `^container ${id}: process ${process.pid} is not the container's \\(process ${process.pid} is in cgroup \\S+, not in container ${id}'s ${cgroupsPath} \\(its linux.cgroupsPath\\)\\); nothing is written through it$`,
          ),
        )
      // Without a cgroupsPath, the cgroup must name the container.
      const child = await startInCgroup()
      const noPath: RuntimeContainer = {id, labels: {}, spec: {linux: {}}}
      expect(await ContainerHandle.open({...noPath, id: 'another-container'}, child.pid!, {pidfd}).catch((e: Error) => e)).to.be.instanceOf(ContainerGoneError)
      const handle = await ContainerHandle.open(noPath, child.pid!, {pidfd})
      handle.close()
      expect(await fds()).to.equal(before)
    })
  }
})

describe("container handle on the real node: containerd's cgroupsPath, the container's own /dev, a volume in it", function () {
  let env: NodeEnv
  let containerd: ContainerdClient
  const pods: string[] = []

  before(async function () {
    env = await testNode(this)
    containerd = new ContainerdClient({address: env.node.containerd.socket, namespace: 'k8s.io'})
  })

  afterEach(async function () {
    this.timeout(60_000)
    await deletePods(env, pods.splice(0))
  })

  after(function () {
    containerd?.close()
  })

  /** A busybox pod on the node with an emptyDir on disk at /dev/input and one in memory (a tmpfs kubelet mounts on the host) at /dev/memory. */
  const runPodWithVolumes = async (name: string): Promise<{container: RuntimeContainer; pid: number}> => {
    pods.push(name)
    const image = {image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never'}
    await env.client.request('POST', '/api/v1/namespaces/default/pods', {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name},
        spec: {
          automountServiceAccountToken: false,
          containers: [
            {
              ...image,
              command: ['sleep', '3600'],
              name: 'main',
              volumeMounts: [
                {mountPath: '/dev/input', name: 'input'},
                {mountPath: '/dev/memory', name: 'memory'},
              ],
            },
          ],
          nodeName: env.node.name,
          terminationGracePeriodSeconds: 1,
          volumes: [
            {emptyDir: {}, name: 'input'},
            {emptyDir: {medium: 'Memory'}, name: 'memory'},
          ],
        },
      },
    })
    const pod = await waitForPod(env, name)
    const container = await containerd.getContainer(pod.containerId)
    const task = await containerd.getTask(pod.containerId)
    return {container: container!, pid: task!.pid}
  }

  it("opens a running container: its cgroup is the spec's, device nodes go on its own /dev tmpfs and never into its volumes", async function () {
    const {container, pid} = await runPodWithVolumes('handle-volumes')
    const cgroupsPath = container.spec?.linux?.cgroupsPath
    expect(cgroupsPath).to.be.a('string').and.include(container.id)
    const handle = await ContainerHandle.open(container, pid)
    try {
      // Its root is its rootfs, which containerd mounted on the host.
      expect(handle.rootProblem).to.equal(undefined)
      expect(handle.rootVerdict.rootfs)
        .to.have.property('mountPoint')
        .that.match(new RegExp(`/io\\.containerd\\.runtime\\.v2\\.task/k8s\\.io/${container.id}/rootfs$`))
      expect(handle.control.dir.endsWith(cgroupOfSpec(cgroupsPath!))).to.equal(true)
      expect(await readFile(`/proc/${pid}/cgroup`, 'utf8')).to.include(cgroupOfSpec(cgroupsPath!))
      const spec = {gid: 0, major: 1, minor: 3, mode: 0o666, type: 'char' as const, uid: 0}
      expect(createDeviceNode(handle.root, {...spec, path: '/dev/nfdctl-null'})).to.equal(true)
      expect((await env.node.exec(container.id, ['ls', '-ln', '/dev/nfdctl-null'])).trim()).to.match(/^crw-rw-rw-\s+1 0\s+0\s+1,\s+3 /)
      expect(() => createDeviceNode(handle.root, {...spec, path: '/dev/input/event9'})).to.throw(PathInsideError, /\/dev\/input in .* is another mount/)
      expect(() => createDeviceNode(handle.root, {...spec, path: '/dev/memory/event9'})).to.throw(PathInsideError, /\/dev\/memory in .* is another mount/)
      expect((await env.node.exec(container.id, ['ls', '-A', '/dev/input', '/dev/memory'])).trim()).to.equal('/dev/input:\n\n/dev/memory:')
      handle.assertRunning()
    } finally {
      handle.close()
    }
  })

  /** A busybox pod whose init process copies busybox into `jail` (an emptyDir on the host's disk with `volume`) and chroots there. */
  const runChrootedPod = async (name: string, jail: string, volume: boolean): Promise<{container: RuntimeContainer; pid: number}> => {
    pods.push(name)
    const script = `mkdir -p ${jail}/bin ${jail}/dev && cp /bin/busybox ${jail}/bin/busybox && exec chroot ${jail} /bin/busybox sleep 3600`
    const main = {command: ['sh', '-c', script], image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'main'}
    await env.client.request('POST', '/api/v1/namespaces/default/pods', {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name},
        spec: {
          automountServiceAccountToken: false,
          containers: [volume ? {...main, volumeMounts: [{mountPath: jail, name: 'jail'}]} : main],
          nodeName: env.node.name,
          terminationGracePeriodSeconds: 1,
          volumes: volume ? [{emptyDir: {}, name: 'jail'}] : [],
        },
      },
    })
    const pod = await waitForPod(env, name)
    const container = (await containerd.getContainer(pod.containerId))!
    const pid = (await containerd.getTask(pod.containerId))!.pid
    await waitFor('the init process chrooted', async () => (await readFile(`/proc/${pid}/cmdline`, 'utf8')).startsWith('/bin/busybox\0sleep'))
    return {container, pid}
  }

  // /dev/kmsg's numbers: no runtime allows them by default, so the rule read back is the one applied here.
  const kmsg: Device = {
    devName: 'kmsg',
    devNode: '/dev/kmsg',
    devPath: '/devices/virtual/mem/kmsg',
    id: 'c1:11',
    kernelName: 'kmsg',
    major: 1,
    minor: 11,
    properties: {},
    subsystem: 'mem',
    type: 'char',
  }

  for (const [where, jail, volume, problem] of [
    ["a volume (the host's disk)", '/data', true, 'is on another filesystem \\(\\d+:\\d+\\) than its rootfs \\S+/ID/rootfs \\(\\d+:\\d+\\)'],
    ['a directory of its image', '/jail', false, 'is a directory inside its rootfs \\S+/ID/rootfs, not its top'],
  ] as const) {
    it(`a container whose init process chroots into ${where}: its root is not its rootfs, the rule is applied and no node is made there`, async function () {
      const {container, pid} = await runChrootedPod(`handle-chroot${volume ? '-volume' : '-image'}`, jail, volume)
      const handle = await ContainerHandle.open(container, pid)
      try {
        expect(handle.rootProblem).to.match(new RegExp(`^its root ${problem.replace('ID', container.id)}: its init process changed its root \\(chroot\\)$`))
        const ours = (id: string): Device | undefined => (id === kmsg.id ? kmsg : undefined)
        const held = await currentAccess(handle.control, ours)
        const access = {access: 'rw', device: kmsg}
        await applyAccess(handle, {grant: [access], revoke: []}, programAfter(held, new Map([[kmsg.id, access]]), new Set()))
        expect([...(await currentAccess(handle.control, ours)).devices.keys()]).to.deep.equal([kmsg.id])
      } finally {
        handle.close()
      }
      // A process exec'd into the container has its real root: the jail's dev/ and the container's /dev have no node.
      expect((await env.node.exec(container.id, ['ls', '-A', `${jail}/dev`])).trim()).to.equal('')
      expect(await env.node.execFailure(container.id, ['ls', '/dev/kmsg'])).to.match(/No such file/)
    })
  }

  it("refuses another container's PID (as a reused PID would be), and one whose container has gone", async function () {
    const a = await runPodWithVolumes('handle-a')
    const b = await runPodWithVolumes('handle-b')
    const error = await ContainerHandle.open(a.container, b.pid).catch((e: Error) => e)
    expect(error).to.be.instanceOf(ContainerGoneError).with.property('message').include(`is not the container's (process ${b.pid} is in cgroup`)
    const handle = await ContainerHandle.open(a.container, a.pid)
    try {
      await deletePods(env, pods.splice(0))
      await waitFor('the pinned process reported gone', async () => !handle.isRunning())
      expect(() => handle.assertRunning()).to.throw(ContainerGoneError)
    } finally {
      handle.close()
    }
  })
})
