// npm run bench:plugins -- [--cycles 50] [--restarts 10]       (root; runs inside a test network namespace)
//
// `plugins serve` from the installed CLI (npm pack) against a real kubelet on a real node:
// 1. uevent → ListAndWatch: a loop device is added and removed through /dev/loop-control --cycles times; each
//    change is timed from the moment the kernel's uevent reaches this process (its own netlink socket: the
//    multicast reaches the plugin at the same moment) until the new list arrives on a ListAndWatch stream this
//    benchmark holds on the plugin's socket, as kubelet does.
// 2. uevent → allocatable: until the Node's allocatable, as kubelet reports it, shows the change (polled every
//    20 ms; kubelet posts status every nodeStatusUpdateFrequency = 1 s here, which dominates).
// 3. kubelet restart → re-registered: kubelet stopped and started --restarts times; timed from its start
//    (kubelet then deletes every plugin socket) until the plugin logs its new registration.
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {parseArgs} from 'node:util'

import {parseUevent} from '../src/lib/devices/uevent.js'
import {kubeletApi, type ListAndWatchResponse} from '../src/lib/kubelet/device-plugin-api.js'
import {NetlinkUeventSocket} from '../src/lib/sys/netlink-uevents.js'
import {canUseLoopControl, loopControlAsync, removeLoopDevice} from '../harness/devices/loop-devices.js'
import {CliProcess} from '../harness/process/cli-process.js'
import {waitFor} from '../harness/process/wait.js'
import {percentile, row, verdict} from './measure.js'
import {startNodeBench} from './setup.js'

const {values} = parseArgs({options: {cycles: {default: '50', type: 'string'}, restarts: {default: '10', type: 'string'}}})
const cycles = Number(values.cycles)
const restarts = Number(values.restarts)
if (!Number.isInteger(cycles) || cycles < 1 || !Number.isInteger(restarts) || restarts < 1) {
  process.stderr.write('bench:plugins: --cycles and --restarts must be positive whole numbers\n')
  process.exit(2)
}
if (!canUseLoopControl()) {
  process.stderr.write('bench:plugins: needs root and /dev/loop-control\n')
  process.exit(2)
}
const log = (line: string): void => void process.stderr.write(`${line}\n`)
log(`bench:plugins: ${cycles} loop add/remove cycles and ${restarts} kubelet restarts; about ${Math.ceil((cycles * 3 + restarts * 3) / 60) + 1} minutes`)

const loopIndex = 400
const env = await startNodeBench(log)
const classFile = join(env.dir, 'classes.yaml')
await writeFile(
  classFile,
  `apiVersion: devices.nfdctl.io/v1alpha1
kind: DeviceClass
metadata: {name: bench-loop}
spec:
  match: [{subsystem: block, devName: "loop${loopIndex}"}]
  allocation: Device
`,
)
const resource = 'devices.nfdctl.io/bench-loop'
const serve = new CliProcess(['plugins', 'serve', '--class-file', classFile, '--node-name', env.node.name, '--metrics-port', '0', '--log-format', 'json'], env.bin, undefined, 'shebang')
interface LogLine {
  class?: string
  state?: string
  time: number
}
const registrations = (): number[] =>
  serve
    .json<LogLine>()
    .filter((l) => l.class === 'bench-loop' && l.state === 'registered')
    .map((l) => l.time)
const allocatable = async (): Promise<number> => {
  const node = await env.client.request<{status?: {allocatable?: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
  return Number(node.status?.allocatable?.[resource] ?? 0)
}

const uevents: Array<{action: string; at: number}> = []
const netlink = new NetlinkUeventSocket({
  onDatagram: (datagram) => {
    const at = performance.now()
    const event = parseUevent(datagram)
    if (event?.subsystem === 'block' && event.env.DEVNAME === `loop${loopIndex}`) uevents.push({action: event.action, at})
  },
  onError: (error) => log(`uevent socket: ${error.message}`),
  onOverflow: () => log('uevent socket overflowed'),
})

const lists: Array<{healthy: number; at: number}> = []
let stream: {cancel: () => void} | undefined
try {
  await netlink.start()
  await serve.waitFor('the plugin registered', () => (registrations().length > 0 ? true : undefined), {timeoutMs: 30_000})
  const api = await kubeletApi()
  const plugin = new api.devicePluginClient(`unix:${join(env.node.pluginDir, 'nfdctl-bench-loop.sock')}`, api.grpc.credentials.createInsecure())
  const call = (plugin as unknown as {ListAndWatch: (request: object) => NodeJS.ReadableStream & {cancel: () => void}}).ListAndWatch({})
  call.on('data', (answer: ListAndWatchResponse) => lists.push({at: performance.now(), healthy: answer.devices.filter((d) => d.health === 'Healthy').length}))
  call.on('error', () => {})
  stream = call
  await waitFor('the first list', async () => lists.length > 0)

  const toStream: number[] = []
  const toAllocatable: number[] = []
  const measure = async (action: 'add' | 'remove', healthy: number): Promise<void> => {
    const [eventsBefore, listsBefore] = [uevents.length, lists.length]
    if ((await loopControlAsync(action, loopIndex)) < 0) throw new Error(`loop ${action} failed`)
    const event = await waitFor(`the ${action} uevent`, async () => uevents.slice(eventsBefore).find((e) => e.action === action))
    const list = await waitFor(`the list after ${action}`, async () => lists.slice(listsBefore).find((l) => l.healthy === healthy))
    toStream.push(list.at - event.at)
    await waitFor(`allocatable ${healthy}`, async () => (await allocatable()) === healthy, {intervalMs: 20, timeoutMs: 15_000})
    toAllocatable.push(performance.now() - event.at)
  }
  for (let i = 0; i < cycles; i++) {
    await measure('add', 1)
    await measure('remove', 0)
  }
  stream.cancel()
  plugin.close()

  const reRegistered: number[] = []
  for (let i = 0; i < restarts; i++) {
    const before = registrations().length
    await env.node.kubelet.stop()
    const started = Date.now()
    await env.node.kubelet.start(env.client)
    const at = await serve.waitFor('the plugin registered again', () => registrations()[before], {timeoutMs: 15_000})
    reRegistered.push(at - started)
  }

  const p95Stream = percentile(toStream, 95)
  const p95Register = percentile(reRegistered, 95)
  process.stdout.write(
    [
      `plugins serve (installed CLI) on a real kubelet v1.37.2: ${cycles} loop add/remove cycles (${toStream.length} changes), ${restarts} kubelet restarts`,
      row('uevent → ListAndWatch send, p50 / p95', `${percentile(toStream, 50).toFixed(1)} / ${p95Stream.toFixed(1)} ms`, `budget p95 <= 50 ms: ${verdict(p95Stream <= 50)}`),
      row(
        'uevent → Node allocatable, p50 / p95',
        `${(percentile(toAllocatable, 50) / 1000).toFixed(2)} / ${(percentile(toAllocatable, 95) / 1000).toFixed(2)} s`,
        '(kubelet posts node status every 1 s here)',
      ),
      row('kubelet start → re-registered, p50 / p95', `${percentile(reRegistered, 50)} / ${p95Register} ms`, `budget p95 <= 1000 ms: ${verdict(p95Register <= 1000)}`),
    ].join('\n') + '\n',
  )
  process.exitCode = p95Stream <= 50 && p95Register <= 1000 ? 0 : 1
} finally {
  stream?.cancel()
  await serve.stop('SIGTERM')
  await netlink.stop()
  removeLoopDevice(loopIndex)
  await env.close()
}
