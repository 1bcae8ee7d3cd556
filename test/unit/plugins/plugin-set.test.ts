import {expect} from 'chai'
import {lstat, mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type * as grpc from '@grpc/grpc-js'

import {ClassMembers} from '../../../src/lib/devices/class-members.js'
import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {DeviceClass} from '../../../src/lib/devices/types.js'
import {unary} from '../../../src/lib/grpc-unary.js'
import {kubeletApi, type AllocateResponse, type ListAndWatchResponse} from '../../../src/lib/kubelet/device-plugin-api.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {cdiFileOf} from '../../../src/lib/plugins/class-cdi.js'
import {createPluginMetrics} from '../../../src/lib/plugins/plugin-metrics.js'
import {PluginSet} from '../../../src/lib/plugins/plugin-set.js'
import type {CdiSpec} from '../../../src/lib/runtime/cdi-spec.js'
import {SourceSupervisor} from '../../../src/lib/source-supervisor.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {waitFor} from '../../../harness/process/wait.js'
import {deviceClass} from '../../support/device-class.js'
import {FakeKubelet} from '../../support/fake-kubelet.js'
import {recordingLogger} from '../../support/recording-logger.js'

const noAttributes = (): undefined => undefined
const soon = {intervalMs: 5, timeoutMs: 5000}

/** A class of loop devices by name pattern; `spec` sets the rest. */
const loops = (name: string, devName: string, spec: Partial<DeviceClass['spec']> = {}): DeviceClass => deviceClass(name, {match: [{devName, subsystem: 'block'}], ...spec})

/** kubelet's side of one class's device plugin: a real gRPC client on its socket. */
class PluginClient {
  /** Every list ListAndWatch sent, as the device IDs. */
  readonly lists: string[][] = []
  #stream: grpc.ClientReadableStream<ListAndWatchResponse> | undefined

  private constructor(readonly client: grpc.Client) {}

  static async of(socket: string): Promise<PluginClient> {
    const api = await kubeletApi()
    return new PluginClient(new api.devicePluginClient(`unix:${socket}`, api.grpc.credentials.createInsecure()))
  }

  /** Opens ListAndWatch, as kubelet does after a registration; the lists it sends are kept. */
  listAndWatch(): void {
    const open = (this.client as unknown as {ListAndWatch(request: object): grpc.ClientReadableStream<ListAndWatchResponse>}).ListAndWatch({})
    open.on('data', (response: ListAndWatchResponse) => void this.lists.push(response.devices.map((d) => d.ID)))
    open.on('error', () => {}) // cancelled at close, or the plugin shut down
    this.#stream = open
  }

  allocate(ids: string[]): Promise<AllocateResponse> {
    return unary<object, AllocateResponse>(this.client, 'Allocate', {container_requests: [{devices_ids: ids}]}, 2000)
  }

  close(): void {
    this.#stream?.cancel()
    this.client.close()
  }
}

const exists = async (path: string): Promise<boolean> => (await lstat(path).catch(() => undefined)) !== undefined
const readSpec = async (file: string): Promise<CdiSpec | undefined> => {
  const text = await readFile(file, 'utf8').catch(() => undefined)
  return text === undefined ? undefined : (JSON.parse(text) as CdiSpec)
}

describe('PluginSet', function () {
  let dir: string
  let cdiDir: string
  let kubelet: FakeKubelet
  let supervisor: SourceSupervisor
  const sets: PluginSet[] = []
  const clients: PluginClient[] = []

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-plugin-set-'))
    cdiDir = join(dir, 'cdi')
    kubelet = new FakeKubelet(dir)
    supervisor = new SourceSupervisor()
  })

  afterEach(async function () {
    for (const client of clients.splice(0)) client.close()
    for (const set of sets.splice(0)) await set.stop()
    supervisor.stop()
    await kubelet.stop()
    await rm(dir, {force: true, recursive: true})
  })

  /** A set of plugins over `members`, kubelet's directory being `dir`; CDI specs in cdiDir unless told `cdi: false`. */
  function pluginSet(members: ClassMembers, options: {cdi?: boolean} = {}): PluginSet {
    const set = new PluginSet({
      cdiDir: options.cdi === false ? undefined : cdiDir,
      logger: recordingLogger(),
      maxRetryMs: 20,
      members,
      metrics: createPluginMetrics(new Registry()),
      pluginDir: dir,
      supervisor,
    })
    sets.push(set)
    return set
  }

  /** Members of `classes` with these loop devices present. */
  function membersOf(classes: DeviceClass[], minors: number[]): ClassMembers {
    const members = new ClassMembers(noAttributes, classes)
    for (const minor of minors) members.deviceEvent('add', loop(minor))
    return members
  }

  async function client(className: string): Promise<PluginClient> {
    const opened = await PluginClient.of(socketOf(className))
    clients.push(opened)
    return opened
  }

  const socketOf = (className: string): string => join(dir, `nfdctl-${className}.sock`)
  const registrationsOf = (className: string): number => kubelet.resourceNames.filter((r) => r === `devices.nfdctl.io/${className}`).length

  it('start(): serves every class but the DRA ones on its socket and registers it; ready once all are registered', async function () {
    const members = membersOf([loops('loopa', 'loop[0-4]'), loops('loopd', 'loop[5-9]', {allocation: 'Device'}), loops('loopr', 'loop1[0-9]', {allocation: 'DRA'})], [1, 5, 10])
    const plugins = pluginSet(members)
    await plugins.start()
    expect(plugins.status()).to.deep.equal({ready: false, reason: 'loopa: kubelet absent; loopd: kubelet absent'})
    expect([await exists(socketOf('loopa')), await exists(socketOf('loopd')), await exists(socketOf('loopr'))]).to.deep.equal([true, true, false])

    await kubelet.start()
    await waitFor('ready', async () => plugins.status().ready, soon)
    expect(plugins.status().reason).to.equal('registered: loopa, loopd')
    expect(kubelet.requests.sort((a, b) => a.endpoint.localeCompare(b.endpoint))).to.deep.equal([
      {endpoint: 'nfdctl-loopa.sock', options: {get_preferred_allocation_available: false, pre_start_required: false}, resource_name: 'devices.nfdctl.io/loopa', version: 'v1beta1'},
      {endpoint: 'nfdctl-loopd.sock', options: {get_preferred_allocation_available: true, pre_start_required: false}, resource_name: 'devices.nfdctl.io/loopd', version: 'v1beta1'},
    ])
  })

  it('publish(): a device that joins a class goes out on the open ListAndWatch stream, and its CDI spec is rewritten with the class alone', async function () {
    const members = membersOf([loops('loopa', 'loop[0-4]'), loops('loopd', 'loop[5-9]', {allocation: 'Device'})], [1, 5])
    await kubelet.start()
    const plugins = pluginSet(members)
    await plugins.start()
    const loopd = await client('loopd')
    loopd.listAndWatch()
    await waitFor('the first list', async () => loopd.lists.length === 1, soon)
    expect(loopd.lists[0]).to.deep.equal([stableDeviceId(loop(5))])

    plugins.publish(members.deviceEvent('add', loop(6)))
    await waitFor('the second list', async () => loopd.lists.length === 2, soon)
    expect(loopd.lists[1]).to.deep.equal([loop(5), loop(6)].map((d) => stableDeviceId(d)))
    const spec = await waitFor(
      'the spec with both devices',
      async () => {
        const read = await readSpec(cdiFileOf(cdiDir, 'loopd'))
        return read?.devices.length === 2 && read
      },
      soon,
    )
    expect(spec.kind).to.equal('devices.nfdctl.io/loopd')
    expect(spec.devices.map((d) => [d.name, d.containerEdits.deviceNodes[0].path])).to.deep.equal([
      [stableDeviceId(loop(5)), '/dev/loop5'],
      [stableDeviceId(loop(6)), '/dev/loop6'],
    ])
    const loopa = await waitFor("the other class's spec", async () => readSpec(cdiFileOf(cdiDir, 'loopa')), soon)
    expect([loopa.kind, loopa.devices.map((d) => d.containerEdits.deviceNodes[0].path)]).to.deep.equal(['devices.nfdctl.io/loopa', ['/dev/loop1']])
  })

  it('classesChanged(): a changed class is replaced under its name, a removed one leaves no socket nor spec, a new one is served and registered', async function () {
    const members = membersOf([loops('loopa', 'loop[0-4]'), loops('loopd', 'loop[5-9]', {allocation: 'Device'}), loops('gone', 'loop[0-4]')], [1, 5])
    await kubelet.start()
    const plugins = pluginSet(members)
    await plugins.start()
    await waitFor("the removed class's spec", async () => exists(cdiFileOf(cdiDir, 'gone')), soon)

    members.setClasses([loops('loopa', 'loop[0-4]', {capacity: 2}), loops('loopd', 'loop[5-9]', {allocation: 'Device'}), loops('added', 'loop[0-4]')])
    plugins.classesChanged()
    expect(plugins.classNames.sort()).to.deep.equal(['added', 'loopa', 'loopd'])
    await waitFor('the changed class registered again, the new one registered', async () => registrationsOf('loopa') === 2 && registrationsOf('added') === 1, soon)
    await waitFor('ready', async () => plugins.status().ready, soon)
    await waitFor("the removed class's socket and spec gone", async () => !(await exists(socketOf('gone'))) && !(await exists(cdiFileOf(cdiDir, 'gone'))), soon)
    expect(registrationsOf('loopd')).to.equal(1)
    expect(registrationsOf('gone')).to.equal(1)

    const loopa = await client('loopa')
    loopa.listAndWatch()
    await waitFor('the changed class listed', async () => loopa.lists.length === 1, soon)
    expect(loopa.lists[0]).to.deep.equal(['slot-0', 'slot-1'])
  })

  it('a kubelet restart has every plugin register again; a plugin socket kubelet deleted is served again', async function () {
    const members = membersOf([loops('loopa', 'loop[0-4]'), loops('loopd', 'loop[5-9]', {allocation: 'Device'})], [1, 5])
    await kubelet.start()
    const plugins = pluginSet(members)
    await plugins.start()
    expect(plugins.status().ready).to.equal(true)

    await kubelet.start()
    await waitFor('both registered again', async () => registrationsOf('loopa') === 2 && registrationsOf('loopd') === 2, soon)

    await rm(socketOf('loopd'))
    await waitFor('served and registered again', async () => registrationsOf('loopd') === 3 && (await exists(socketOf('loopd'))), soon)
    expect(registrationsOf('loopa')).to.equal(2)
    const loopd = await client('loopd')
    loopd.listAndWatch()
    await waitFor('listed on the new socket', async () => loopd.lists.length === 1, soon)
    expect(plugins.status().ready).to.equal(true)
  })

  it('stop(): the sockets are removed, the CDI specs stay', async function () {
    const members = membersOf([loops('loopa', 'loop[0-4]'), loops('loopd', 'loop[5-9]', {allocation: 'Device'})], [1, 5])
    await kubelet.start()
    const plugins = pluginSet(members)
    await plugins.start()
    await waitFor('the specs', async () => (await exists(cdiFileOf(cdiDir, 'loopa'))) && exists(cdiFileOf(cdiDir, 'loopd')), soon)
    await plugins.stop()
    expect([await exists(socketOf('loopa')), await exists(socketOf('loopd'))]).to.deep.equal([false, false])
    expect([await exists(cdiFileOf(cdiDir, 'loopa')), await exists(cdiFileOf(cdiDir, 'loopd')), await exists(kubelet.path)]).to.deep.equal([true, true, true])
  })

  it('Allocate on the socket: CDI device names with CDI, the env and annotation without', async function () {
    await kubelet.start()
    const classes = [loops('loopd', 'loop[5-9]', {allocation: 'Device', permissions: 'r'}), loops('loopa', 'loop[0-4]')]
    const withCdi = pluginSet(membersOf(classes, [1, 5]))
    await withCdi.start()
    const id = stableDeviceId(loop(5))
    const cdiAnswer = (await (await client('loopd')).allocate([id])).container_responses[0]
    expect(cdiAnswer.cdi_devices).to.deep.equal([{name: `devices.nfdctl.io/loopd=${id}`}])
    expect(cdiAnswer.devices).to.deep.equal([{container_path: '/dev/loop5', host_path: '/dev/loop5', permissions: 'r'}])
    await withCdi.stop()

    const withoutCdi = pluginSet(membersOf(classes, [1, 5]), {cdi: false})
    await withoutCdi.start()
    const answer = (await (await client('loopa')).allocate(['slot-0'])).container_responses[0]
    expect(answer.cdi_devices).to.deep.equal([])
    expect(answer.envs).to.deep.equal({NFDCTL_DEVICES_LOOPA: '/dev/loop1'})
    expect(answer.annotations).to.deep.equal({'classes.devices.nfdctl.io/loopa': 'slot-0'})
  })
})
