import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {promisify} from 'node:util'

import {ContainerdClient, type RuntimeEvent} from '../../src/lib/runtime/containerd-client.js'
import {allowDevice, denyDevice, deviceControlOf, readDeviceRules} from '../../src/lib/runtime/device-cgroup.js'
import {createDeviceNode, removeDeviceNode} from '../../src/lib/sys/device-nodes.js'
import {PathInsideError} from '../../src/lib/sys/path-inside.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {firstLoop} from '../../harness/devices/loop-owners.js'
import {deletePods, runPod, type NodeEnv} from '../../harness/node/pods.js'
import {waitFor} from '../../harness/process/wait.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {testNode} from '../support/test-node.js'

const run = promisify(execFile)

describe('runtime: containerd, cgroup v1 device rules and device nodes on the real node', function () {
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

  it("lists the pod's container with its CRI labels and OCI spec, and its task with the init PID", async function () {
    pods.push('runtime-list')
    const pod = await runPod(env, {command: ['sleep', '3600'], name: 'runtime-list'})
    const container = (await containerd.listContainers()).find((c) => c.id === pod.containerId)
    expect(container?.labels).to.include({'io.kubernetes.container.name': 'main', 'io.kubernetes.pod.name': 'runtime-list', 'io.kubernetes.pod.namespace': 'default', 'io.kubernetes.pod.uid': pod.uid})
    // containerd's CRI starts every container from a deny-all rule plus the standard devices.
    expect(container?.spec?.linux?.resources?.devices?.[0]).to.deep.include({access: 'rwm', allow: false})
    expect((await containerd.getContainer(pod.containerId))?.labels['io.kubernetes.pod.name']).to.equal('runtime-list')
    expect(await containerd.getContainer('no-such-container')).to.equal(undefined)
    // Filtered by containerd: the workload containers, without the pods' sandboxes.
    const workloads = await containerd.listContainers(['labels."io.cri-containerd.kind"==container'])
    expect(workloads.map((c) => c.id)).to.include(pod.containerId)
    expect(workloads.every((c) => c.labels['io.cri-containerd.kind'] === 'container')).to.equal(true)
    expect(workloads.length).to.be.below((await containerd.listContainers()).length)
    const task = (await containerd.listTasks()).find((t) => t.containerId === pod.containerId)
    expect(task?.status).to.equal('RUNNING')
    expect(await readFile(`/proc/${task!.pid}/cgroup`, 'utf8')).to.include(pod.containerId)
    expect(await containerd.getTask(pod.containerId)).to.deep.equal(task)
    expect(await containerd.getTask('no-such-container')).to.equal(undefined)
  })

  it('streams container and task events with their payloads decoded by bare type name', async function () {
    const events: RuntimeEvent[] = []
    let ended: Error | undefined
    const unsubscribe = await containerd.subscribe(
      (e) => events.push(e),
      (error) => (ended = error),
    )
    try {
      pods.push('runtime-events')
      const pod = await runPod(env, {command: ['sleep', '3600'], name: 'runtime-events'})
      const started = await waitFor("TaskStart of the pod's container", async () => events.find((e) => e.type === 'containerd.events.TaskStart' && e.payload?.container_id === pod.containerId))
      expect(started.topic).to.equal('/tasks/start')
      expect(started.namespace).to.equal('k8s.io')
      const task = (await containerd.listTasks()).find((t) => t.containerId === pod.containerId)
      expect(started.payload?.pid).to.equal(task?.pid)
      expect(events.some((e) => e.type === 'containerd.events.ContainerCreate' && e.payload?.id === pod.containerId)).to.equal(true)
      await deletePods(env, pods.splice(0))
      await waitFor(
        'TaskExit and ContainerDelete',
        async () =>
          events.some((e) => e.type === 'containerd.events.TaskExit' && e.payload?.container_id === pod.containerId && e.payload?.id === pod.containerId)
          && events.some((e) => e.type === 'containerd.events.ContainerDelete' && e.payload?.id === pod.containerId),
        {timeoutMs: 30_000},
      )
      expect(events.every((e) => /^\/(containers|tasks)\//.test(e.topic))).to.equal(true) // the server-side filter
      expect(ended).to.equal(undefined)
    } finally {
      unsubscribe()
    }
  })

  it('subscribes on a quiet containerd too (its headers come only with a first event), and a closed client keeps no connection', async function () {
    // A namespace where nothing happens: no event, so no headers, ever.
    const quiet = new ContainerdClient({address: env.node.containerd.socket, namespace: 'nfdctl-quiet'})
    const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
    const before = await fds()
    const started = performance.now()
    const unsubscribe = await Promise.race([
      quiet.subscribe(
        () => {},
        () => {},
      ),
      sleep(3000).then(() => undefined),
    ])
    expect(unsubscribe, 'subscribed within 3 s').to.be.a('function')
    expect(performance.now() - started).to.be.below(1500)
    unsubscribe!()
    quiet.close()
    await waitFor('the connection closed', async () => (await fds()) <= before, {timeoutMs: 5000})
    // A socket nobody listens on fails the subscription rather than hanging it.
    const absent = new ContainerdClient({address: join(tmpdir(), 'nfdctl-no-containerd.sock'), namespace: 'k8s.io', timeoutMs: 1000})
    try {
      const error = await absent
        .subscribe(
          () => {},
          () => {},
        )
        .then(
          () => undefined,
          (e: Error) => e,
        )
      expect(error?.message).to.match(/deadline|UNAVAILABLE|connect/i)
    } finally {
      absent.close()
    }
  })

  it('hot-plugs a loop device into a running container (cgroup v1 rule + node through /proc/<pid>/root) and takes it away again', async function () {
    // A pod start on a busy node can take most of mocha's default 30 s; a test that times out runs its finally
    // later, beside the next suite, which then sees this loop device vanish under it.
    this.timeout(120_000)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable')
    const index = firstLoop('test/e2e/runtime.test.ts')
    const dir = await mkdtemp(join(tmpdir(), 'nfdctl-hotplug-'))
    addLoopDevice(index)
    try {
      await writeFile(join(dir, 'backing'), 'hot-plug-data'.padEnd(4096, '.'))
      await run('losetup', [`/dev/loop${index}`, join(dir, 'backing')])
      pods.push('runtime-hotplug')
      const pod = await runPod(env, {command: ['sleep', '3600'], name: 'runtime-hotplug'})
      const pid = (await containerd.listTasks()).find((t) => t.containerId === pod.containerId)!.pid
      const control = await deviceControlOf(pid)
      expect(control.mode).to.equal('v1')
      expect(control.dir).to.match(new RegExp(`/devices/nfdctl-${env.node.name}/kubepods/.*${pod.containerId}$`))
      const readCommand = ['dd', `if=/dev/loop${index}`, 'bs=13', 'count=1', 'status=none']
      const readFails = (): Promise<string> => env.node.execFailure(pod.containerId, readCommand)

      expect(await readFails()).to.match(/No such file/)
      const node = {gid: 0, major: 7, minor: index, mode: 0o660, path: `/dev/loop${index}`, type: 'block' as const, uid: 0}
      expect(createDeviceNode(`/proc/${pid}/root`, node)).to.equal(true)
      expect(createDeviceNode(`/proc/${pid}/root`, node)).to.equal(false) // already there as asked
      expect(await readFails()).to.match(/Operation not permitted/) // the node alone is not access
      await allowDevice(control.dir, {access: 'rw', major: 7, minor: index, type: 'b'})
      expect(await readDeviceRules(control.dir)).to.deep.include({access: 'rw', major: 7, minor: index, type: 'b'})
      expect(await env.node.exec(pod.containerId, readCommand)).to.equal('hot-plug-data')
      expect((await env.node.exec(pod.containerId, ['ls', '-ln', `/dev/loop${index}`])).trim()).to.match(new RegExp(`^brw-rw----\\s+1 0\\s+0\\s+7,\\s+${index} `))

      await denyDevice(control.dir, {access: 'rw', major: 7, minor: index, type: 'b'})
      expect(await readFails()).to.match(/Operation not permitted/)
      expect(removeDeviceNode(`/proc/${pid}/root`, `/dev/loop${index}`, 7, index)).to.equal(true)
      expect(await readFails()).to.match(/No such file/)
    } finally {
      await run('losetup', ['-d', `/dev/loop${index}`]).catch(() => {})
      removeLoopDevice(index)
      await rm(dir, {force: true, recursive: true})
    }
  })
})

describe('device nodes inside a root: exact, and never through a symlink', function () {
  let root: string
  let outside: string

  before(function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'mknod needs root')
  })

  beforeEach(async function () {
    root = await mkdtemp(join(tmpdir(), 'nfdctl-root-'))
    outside = await mkdtemp(join(tmpdir(), 'nfdctl-outside-'))
    await mkdir(join(root, 'dev'))
  })

  afterEach(async function () {
    await rm(root, {force: true, recursive: true})
    await rm(outside, {force: true, recursive: true})
  })

  it('creates parents, the type, numbers, mode and owner asked for, whatever the umask; replaces a node with other numbers', async function () {
    const spec = {gid: 5, major: 188, minor: 3, mode: 0o640, path: '/dev/serial/by-id/usb-x', type: 'char' as const, uid: 1234}
    const umask = process.umask(0o077)
    try {
      expect(createDeviceNode(root, spec)).to.equal(true)
    } finally {
      process.umask(umask)
    }
    const made = await stat(join(root, spec.path))
    expect(made.isCharacterDevice()).to.equal(true)
    expect([made.mode & 0o7777, made.uid, made.gid, Math.floor(made.rdev / 256), made.rdev % 256]).to.deep.equal([0o640, 1234, 5, 188, 3])
    expect(createDeviceNode(root, {...spec, minor: 4})).to.equal(true)
    expect((await stat(join(root, spec.path))).rdev % 256).to.equal(4)
  })

  it('refuses a path through a symlink the container made, and a symlink or file where the node would go', async function () {
    await symlink(outside, join(root, 'dev', 'evil'))
    const spec = {gid: 0, major: 1, minor: 3, mode: 0o666, path: '/dev/evil/null', type: 'char' as const, uid: 0}
    expect(() => createDeviceNode(root, spec)).to.throw(PathInsideError, /is not a plain directory .*a symlink is never followed/)
    expect(
      await lstat(join(outside, 'null')).then(
        () => 'made',
        () => 'absent',
      ),
    ).to.equal('absent')

    await symlink(join(outside, 'target'), join(root, 'dev', 'link'))
    expect(() => createDeviceNode(root, {...spec, path: '/dev/link'})).to.throw(PathInsideError, /exists and is not a device node/)
    expect(await readlink(join(root, 'dev', 'link'))).to.equal(join(outside, 'target'))
    await writeFile(join(root, 'dev', 'file'), 'mine')
    expect(() => createDeviceNode(root, {...spec, path: '/dev/file'})).to.throw(PathInsideError, /exists and is not a device node/)
    expect(() => createDeviceNode(root, {...spec, path: '/dev/../etc/x'})).to.throw(PathInsideError, /"\.\." is not allowed/)
  })

  it('removes only a device node of the given numbers', async function () {
    createDeviceNode(root, {gid: 0, major: 1, minor: 3, mode: 0o666, path: '/dev/n', type: 'char', uid: 0})
    expect(removeDeviceNode(root, '/dev/n', 1, 5)).to.equal(false)
    await writeFile(join(root, 'dev', 'f'), 'mine')
    expect(removeDeviceNode(root, '/dev/f', 1, 3)).to.equal(false)
    expect(removeDeviceNode(root, '/dev/missing/n', 1, 3)).to.equal(false)
    expect(removeDeviceNode(root, '/dev/n', 1, 3)).to.equal(true)
    expect(
      await lstat(join(root, 'dev', 'n')).then(
        () => 'there',
        () => 'gone',
      ),
    ).to.equal('gone')
    expect(await readFile(join(root, 'dev', 'f'), 'utf8')).to.equal('mine')
  })
})
