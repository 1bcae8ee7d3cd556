// npm run bench:dra -- [--cycles 30] [--pods 10] [--replugs 20] [--rss-pods 100]   (root; runs inside a test network namespace)
//
// `devices agent --dra` from the installed CLI (npm pack) as the DRA driver devices.nfdctl.io of a real node
// (containerd 2.4.2 + kubelet v1.37.2, with kube-scheduler and kube-controller-manager):
// 1. Hot-plug → ResourceSlice: a loop device of a DRA class is added and removed through /dev/loop-control
//    --cycles times; each change is timed from the moment the kernel's uevent reaches this process (its own
//    netlink socket: the multicast reaches the agent at the same moment) until a watch on the node's
//    ResourceSlices shows the device there (added), or there with the devices.nfdctl.io/unplugged taint (removed).
// 2. Pod created → its container reads the device, by claim and by limit: --pods rounds, one pod after
//    another, each round a pod with a ResourceClaimTemplate of that class, then a pod asking for one device of
//    the class by resource limit (devices.nfdctl.io/bench-dra: 1, served through DRA: the scheduler makes and
//    allocates its claim); the same disk, the class's only free device, for both. Timed from the pod's creation
//    until its container (whose command reads the disk as it starts, then says so) has read the disk's data,
//    stamped by containerd in the pod's log; also until the API shows the pod Running, and where the time goes
//    (scheduled, claim prepared). Each pod is deleted and its claim gone before the next is created.
// 3. Re-plug → usable again: a running pod holds the claimed disk; it is unplugged (losetup -d, then
//    LOOP_CTL_REMOVE) and plugged in again under another loop number with the same udev serial, --replugs
//    times. Inside the container a waiter, started before the plug, tries to open and read the new /dev/loopN
//    every millisecond and writes to the container's log the moment a read succeeds: timed from the add
//    uevent until containerd stamps that line, and until the agent's "devices updated" line. (The read is not
//    of the disk's data, which waits for the losetup after the add: this process plugging the disk, tens of
//    milliseconds on 2 busy cores, not the agent; the data is checked after.)
// 4. A second node: a second kubelet + containerd (harness/node: its own root, address and mount namespace
//    over the device-plugin directory) is started against the same control plane, timed until its Node is
//    Ready, with its kubelet's and containerd's RSS; a second agent serves it with its own udev database, which
//    gives its disk alone a serial the class matches; --pods pods with a claim on that node, timed as in 2.
//    The node is stopped before 5, so that 5 measures one node as before.
// 5. RSS of the agent serving a device plugin class and the DRA class with --rss-pods pods running (half
//    share one ResourceClaim, half ask the device plugin by resource limit), 35 s after they all run, and its peak.
import {execFile} from 'node:child_process'
import {mkdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {parseArgs, promisify} from 'node:util'

import {parseUevent} from '../src/lib/devices/uevent.js'
import {Informer} from '../src/lib/kube/informer.js'
import type {ObjectMeta} from '../src/lib/kube/resource.js'
import {NetlinkUeventSocket} from '../src/lib/sys/netlink-uevents.js'
import {claimPodManifest, draAgentArgs, limitPodManifest, SerialDisks, sliceCodec, type ClaimPodOptions} from '../harness/devices/dra-agent.js'
import {addLoopDevice, BackedLoops, canUseLoopControl, loopControlAsync, loopData, readLoop} from '../harness/devices/loop-devices.js'
import {TestNode} from '../harness/node/node.js'
import {createNamespace, waitForPod} from '../harness/node/pods.js'
import {CliProcess} from '../harness/process/cli-process.js'
import {waitFor} from '../harness/process/wait.js'
import {memoryOf, percentile, row, verdict} from './measure.js'
import {criTime, podLogLines, type PodStart, timePodStart} from './pod-start.js'
import {startNodeBench} from './setup.js'

const usage = 'bench:dra: --cycles, --pods, --replugs (at most 49) and --rss-pods (an even number, at most 100: kubelet runs 110 pods) must be positive whole numbers'
let values: Record<string, string | undefined>
try {
  ;({values} = parseArgs({
    options: {cycles: {default: '30', type: 'string'}, pods: {default: '10', type: 'string'}, replugs: {default: '20', type: 'string'}, 'rss-pods': {default: '100', type: 'string'}},
  }))
} catch (error) {
  process.stderr.write(`bench:dra: ${(error as Error).message}; ${usage.slice('bench:dra: '.length)}\n`)
  process.exit(2)
}
const [cycles, podCount, replugs, rssPods] = [Number(values.cycles), Number(values.pods), Number(values.replugs), Number(values['rss-pods'])]
if (![cycles, podCount, replugs, rssPods].every((n) => Number.isInteger(n) && n > 0) || replugs > 49 || rssPods > 100 || rssPods % 2 !== 0) {
  process.stderr.write(`${usage}\n`)
  process.exit(2)
}
if (!canUseLoopControl()) {
  process.stderr.write('bench:dra: needs root and /dev/loop-control\n')
  process.exit(2)
}
const benchStarted = performance.now()
const log = (line: string): void => void process.stderr.write(`${line}\n`)
/** A phase's log line, with the minutes since the start. */
const phase = (line: string): void => log(`${line} (at ${((performance.now() - benchStarted) / 60_000).toFixed(1)} min)`)
log(
  `bench:dra: ${cycles} hot-plug cycles, ${podCount} claim and ${podCount} limit pods, ${replugs} re-plugs, a second node with ${podCount} claim pods, ${rssPods} pods for RSS; about ${Math.ceil((cycles * 0.5 + podCount * 3 * 1.5 + replugs * 1.5 + rssPods * 0.5 + 40) / 60) + 2} minutes`,
)

const dra = '/apis/resource.k8s.io/v1'
// Pod created → its container read the device, one budget for every path (claim, limit, second node): above
// what kubelet, containerd and runc take to start a pod on two busy cores (p95 0.3-0.8 s), below what a path
// waiting once on a period would take (the shortest, 1 s, plus that).
const startBudgetMs = 1500
const startBudgetWhy =
  "(a wait on a period would pass it: kube-scheduler's backoff after an unschedulable attempt, 1 s doubling to 10 s; kubelet's PLEG relist, 1 s, and pod worker resync, syncFrequency 10 s here; the claim controller and the scheduler make the claim on the pod's event, no period)"
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const namespace = 'nfdctl-bench-dra'
const draClass = 'bench-dra.devices.nfdctl.io'
const draResource = 'devices.nfdctl.io/bench-dra'
const pluginResource = 'devices.nfdctl.io/bench-plugin'
// Loop devices 530-599 belong to this benchmark: 530 is the device plugin class's, 540 the hot-plugged one,
// 541 the disk of the claim and limit pods, 542 the second node's disk, 550 + i the re-plugged disk after i
// re-plugs.
const pluginLoop = 530
const hotLoop = 540
const claimLoop = 541
const nodeBLoop = 542
const replugBase = 550

const env = await startNodeBench(log, {controllers: true})
const udevDir = join(env.dir, 'udev')
await mkdir(udevDir, {recursive: true})
const loops = new BackedLoops(env.dir)
const benchLoops = [pluginLoop, hotLoop, claimLoop, nodeBLoop, ...Array.from({length: replugs + 1}, (_, k) => replugBase + k)]
/** Unbinds and removes every loop device of the benchmark that exists (left over, or plugged by this run). */
const unplugAll = async (): Promise<void> => {
  for (const i of benchLoops) await loops.drop(i).catch((error: Error) => log(`loop${i}: ${error.message}`))
}
await unplugAll()
const disks = new SerialDisks(udevDir, 'nfdctl-bench')
const serialOf = (disk: string): string => disks.serialOf(disk)
const deviceOf = (disk: string): string => disks.deviceOf(disk)
const udevRecord = (index: number, disk: string): Promise<void> => disks.record(index, disk)
const bySerial = (disk: string): object => ({cel: {expression: `device.attributes["devices.nfdctl.io"].serial == "${serialOf(disk)}"`}})

interface LogLine {
  msg: string
  time: number
  claim?: string
  granted?: string[]
}

const uevents: Array<{devName: string; action: string; at: number; wall: number}> = []
// Wall-clock milliseconds with sub-millisecond steps, comparable with containerd's log stamps and the agent's
// log times: re-anchored on Date.now() each re-plug, so the monotonic clock's drift cannot add up.
let wallAnchor = Date.now() - performance.now()
const netlink = new NetlinkUeventSocket({
  onDatagram: (datagram) => {
    const at = performance.now()
    const event = parseUevent(datagram)
    if (event?.subsystem === 'block' && event.env.DEVNAME?.startsWith('loop')) uevents.push({action: event.action, at, devName: event.env.DEVNAME, wall: wallAnchor + at})
  },
  onError: (error) => log(`uevent socket: ${error.message}`),
  onOverflow: () => log('uevent socket overflowed'),
})
const uevent = (devName: string, action: string, after: number): Promise<(typeof uevents)[number]> =>
  waitFor(`the ${action} uevent of ${devName}`, async () => uevents.slice(after).find((e) => e.devName === devName && e.action === action))

// The node's slices, as a scheduler's watch sees them; each change stamped as it arrives.
interface Slice {
  metadata: ObjectMeta
  spec: {devices?: Array<{name: string; taints?: Array<{key: string}>}>}
}
/** Each state the watch delivers: the devices listed untainted, and those listed as unplugged. */
const sliceChanges: Array<{devices: Set<string>; unplugged: Set<string>; at: number}> = []
const slices: Informer<Slice> = new Informer<Slice>(
  {
    client: env.client,
    fieldSelector: `spec.nodeName=${env.node.name},spec.driver=devices.nfdctl.io`,
    onChanged: () => noteSlices(),
    onDeleted: () => noteSlices(),
    pageSize: 500,
    resource: {group: 'resource.k8s.io', namespaced: false, plural: 'resourceslices', version: 'v1'},
  },
  sliceCodec<Slice>(),
)
function noteSlices(): void {
  const at = performance.now()
  const listed = [...slices.cache.values()].flatMap((s) => s.spec.devices ?? [])
  const unplugged = (d: (typeof listed)[number]): boolean => (d.taints ?? []).some((t) => t.key === 'devices.nfdctl.io/unplugged')
  sliceChanges.push({at, devices: new Set(listed.filter((d) => !unplugged(d)).map((d) => d.name)), unplugged: new Set(listed.filter(unplugged).map((d) => d.name))})
}
const stopSlices = new AbortController()

let agent: CliProcess | undefined
/** The second node and its agent, while they run (phase 4). */
let nodeB: {node: TestNode; agent?: CliProcess} | undefined
try {
  await netlink.start()
  await createNamespace(env, namespace)
  await env.client.request('POST', classesPath, {
    // The serial: each node's agent reads its own udev database, so each pool holds its own node's disks alone.
    body: {
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {name: 'bench-dra'},
      spec: {allocation: 'DRA', match: [{devName: 'loop5[4-9][0-9]', properties: {ID_SERIAL: 'nfdctl-bench-*'}, subsystem: 'block'}]},
    },
  })
  await env.client.request('POST', classesPath, {
    body: {
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {name: 'bench-plugin'},
      spec: {allocation: 'Class', capacity: 100, match: [{devName: 'loop53[0-9]', subsystem: 'block'}]},
    },
  })
  addLoopDevice(pluginLoop)
  await udevRecord(hotLoop, 'hot')
  await udevRecord(claimLoop, 'claim')
  await loops.add(claimLoop)
  agent = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(env.dir, 'agent-state'), udevDir}), env.bin, undefined, 'shebang')
  await agent.waitForLine<LogLine>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 30_000)
  await slices.start(stopSlices.signal)
  await waitFor('the claim disk in the slice', async () => sliceChanges.at(-1)?.devices.has(deviceOf('claim')))
  await waitFor(`the resource.k8s.io DeviceClass ${draClass}`, () => env.client.request('GET', `${dra}/deviceclasses/${draClass}`).catch(() => undefined))

  phase(`1. ${cycles} hot-plug cycles`)
  const toSlice: number[] = []
  const toTaint: number[] = []
  const hot = deviceOf('hot')
  const hotPlug = async (action: 'add' | 'remove'): Promise<void> => {
    const [eventsBefore, changesBefore] = [uevents.length, sliceChanges.length]
    if ((await loopControlAsync(action, hotLoop)) < 0) throw new Error(`loop ${action} failed`)
    const event = await uevent(`loop${hotLoop}`, action, eventsBefore)
    const seen = await waitFor(
      `the slice after ${action}`,
      async () => sliceChanges.slice(changesBefore).find((c) => (action === 'add' ? c.devices.has(hot) : c.unplugged.has(hot) && !c.devices.has(hot))),
      {intervalMs: 5, timeoutMs: 10_000},
    )
    ;(action === 'add' ? toSlice : toTaint).push(seen.at - event.at)
  }
  for (let i = 0; i < cycles; i++) {
    await hotPlug('add')
    await hotPlug('remove')
  }

  phase(`2. ${podCount} rounds, one pod after another: a pod with a ResourceClaimTemplate, then one asking by limit`)
  const createTemplate = (name: string, disk: string): Promise<unknown> =>
    env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaimtemplates`, {
      body: {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaimTemplate',
        metadata: {name},
        spec: {spec: {devices: {requests: [{exactly: {deviceClassName: draClass, selectors: [bySerial(disk)]}, name: 'disk'}]}}},
      },
    })
  await createTemplate('bench-claim', 'claim')
  await createTemplate('bench-replug', 'replug')
  const byClaim: PodStart[] = []
  const byLimit: PodStart[] = []
  for (let i = 0; i < podCount; i++) {
    // Alternated, so that both paths meet the same load on the two cores.
    const [claimName, limitName] = [`bench-claim-${i}`, `bench-limit-${i}`]
    byClaim.push(await timePodStart(env, agent, namespace, claimName, claimPod(claimName, {command: readsThenSleeps(claimLoop, 'read-ok'), template: 'bench-claim'}), 'read-ok'))
    byLimit.push(await timePodStart(env, agent, namespace, limitName, limitPod(limitName, draResource, readsThenSleeps(claimLoop, 'read-ok')), 'read-ok'))
  }

  phase(`3. ${replugs} re-plugs of a claimed disk under another loop number`)
  let index = replugBase
  await udevRecord(index, 'replug')
  await loops.add(index)
  await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body: claimPod('bench-replug', {command: ['sleep', '36000'], template: 'bench-replug'})})
  const holder = await waitForPod(env, `${namespace}/bench-replug`, 120_000)
  const readsFromHolder = (loop: number): Promise<boolean> => readLoop(env.node, holder.containerId, loop).then((text) => text === loopData(loop))
  await waitFor(`bench-replug reads /dev/loop${index}`, () => readsFromHolder(index), {intervalMs: 20, timeoutMs: 10_000})
  const usable: number[] = []
  const granted: number[] = []
  for (let i = 0; i < replugs; i++) {
    await loops.drop(index)
    await rm(join(udevDir, `b7:${index}`), {force: true})
    const gone = index
    await waitFor(`the read of /dev/loop${gone} failing`, async () => !(await readsFromHolder(gone)), {intervalMs: 20, timeoutMs: 10_000})
    index = replugBase + i + 1
    const marker = `usable-${index}`
    // The waiter: started before the disk exists, so its own start is not timed.
    void env.node
      .exec(holder.containerId, [
        'sh',
        '-c',
        // The shell's own open, no process, until the device opens (`true`: a special builtin's failed
        // redirection would end the shell), then a read by dd; not of the disk's data, which waits for the
        // losetup after the add (this process plugging the disk), not for the agent.
        `n=0; until { true < /dev/loop${index}; } 2>/dev/null && dd if=/dev/loop${index} of=/dev/null bs=13 count=1 2>/dev/null; do n=$((n+1)); [ $n -gt 20000 ] && exit 1; usleep 1000; done; echo ${marker} > /proc/1/fd/1`,
      ])
      .catch(() => {})
    await sleep(500) // the waiter runs, and the unplug's batches are done
    wallAnchor = Date.now() - performance.now()
    await udevRecord(index, 'replug')
    const before = uevents.length
    // As BackedLoops.add, but the add on koffi's worker thread, so the uevent is stamped as it arrives.
    if ((await loopControlAsync('add', index)) < 0) throw new Error(`loop add ${index} failed`)
    const added = await uevent(`loop${index}`, 'add', before)
    await bindLoop(index)
    const line = await waitFor(`the waiter's line ${marker}`, async () => (await podLogLines(env, namespace, 'bench-replug', holder.uid)).find((l) => l.endsWith(` ${marker}`)), {
      intervalMs: 5,
      timeoutMs: 10_000,
    })
    usable.push(criTime(line.split(' ')[0]!) - added.wall)
    const grant = agent.json<LogLine>().find((l) => l.msg === 'devices updated' && l.granted?.some((g) => g.startsWith(`/dev/loop${index} `)) && l.time >= added.wall - 1)
    if (grant !== undefined) granted.push(grant.time - added.wall)
    // It is the claimed disk that came back: the container reads its data.
    await waitFor(`bench-replug reads /dev/loop${index}`, () => readsFromHolder(index), {intervalMs: 20, timeoutMs: 10_000})
  }

  phase(`4. a second node, ${podCount} pods with a claim on it`)
  const nodeBStarted = performance.now()
  nodeB = {
    node: await TestNode.start({binDir: env.binDir, dir: join(env.dir, 'node-b'), index: 1, kubeconfig: env.plane.kubeconfig, log, nodeName: 'nfdctl-bench-b'}, env.client),
  }
  const nodeBReadyMs = performance.now() - nodeBStarted
  const nodeBRss = async (): Promise<number> => (await memoryOf(nodeB!.node.kubelet.pid!)).rssMb + (await memoryOf(nodeB!.node.containerd.pid!)).rssMb
  const nodeBRssAtReady = await nodeBRss()
  const envB = {client: env.client, node: nodeB.node, plane: env.plane}
  const udevDirB = join(env.dir, 'udev-b')
  await mkdir(udevDirB, {recursive: true})
  const disksB = new SerialDisks(udevDirB, 'nfdctl-bench')
  await disksB.record(nodeBLoop, 'node-b')
  await loops.add(nodeBLoop)
  nodeB.agent = new CliProcess(draAgentArgs(nodeB.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(env.dir, 'agent-state-b'), udevDir: udevDirB}), env.bin, undefined, 'shebang')
  await nodeB.agent.waitForLine<LogLine>("node B's DRA driver registered", (l) => l.msg.includes('registered with kubelet'), 30_000)
  await waitFor("node B's disk in its pool", async () => {
    const list = await env.client.request<{items: Slice[]}>('GET', `${dra}/resourceslices`, {query: {fieldSelector: `spec.nodeName=${nodeB!.node.name},spec.driver=devices.nfdctl.io`}})
    return list.items.some((s) => (s.spec.devices ?? []).some((d) => d.name === disksB.deviceOf('node-b')))
  })
  await createTemplate('bench-node-b', 'node-b')
  const onNodeB: PodStart[] = []
  for (let i = 0; i < podCount; i++) {
    const name = `bench-node-b-${i}`
    const manifest = claimPodManifest(name, nodeB.node.name, {command: readsThenSleeps(nodeBLoop, 'read-ok'), template: 'bench-node-b', terminationGracePeriodSeconds: 0})
    onNodeB.push(await timePodStart(envB, nodeB.agent, namespace, name, manifest, 'read-ok'))
  }
  const nodeBRssAfterPods = await nodeBRss()
  await stopNodeB()

  phase(`5. ${rssPods} pods: ${rssPods / 2} sharing one ResourceClaim, ${rssPods / 2} asking the device plugin class`)
  await waitFor(
    `${pluginResource} allocatable`,
    async () => {
      const node = await env.client.request<{status?: {allocatable?: Record<string, string>}}>('GET', `/api/v1/nodes/${env.node.name}`)
      return Number(node.status?.allocatable?.[pluginResource] ?? 0) >= rssPods / 2
    },
    {timeoutMs: 30_000},
  )
  await env.client.request('POST', `${dra}/namespaces/${namespace}/resourceclaims`, {
    body: {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: {name: 'bench-shared'},
      spec: {devices: {requests: [{exactly: {deviceClassName: draClass, selectors: [bySerial('claim')]}, name: 'disk'}]}},
    },
  })
  for (let i = 0; i < rssPods; i++) {
    const body = i % 2 === 0 ? claimPod(`bench-rss-${i}`, {claim: 'bench-shared', command: ['sleep', '36000']}) : limitPod(`bench-rss-${i}`, pluginResource)
    await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {body})
  }
  await waitFor(
    `${rssPods} pods running`,
    async () => {
      const list = await env.client.request<{items: PodObject[]}>('GET', `/api/v1/namespaces/${namespace}/pods`)
      return list.items.filter((p) => p.metadata.name.startsWith('bench-rss-') && p.status?.phase === 'Running').length === rssPods
    },
    {intervalMs: 1000, timeoutMs: 15 * 60_000},
  )
  // Steady state: their batches are done and V8's memory reducer, some 20 s after a burst, has run.
  await sleep(35_000)
  const memory = await memoryOf(agent.pid)

  const startP95s = [byClaim, byLimit, onNodeB].map((starts) =>
    percentile(
      starts.map((s) => s.readMs),
      95,
    ),
  )
  const sliceP95 = percentile(toSlice, 95)
  const taintP95 = percentile(toTaint, 95)
  const usableP95 = percentile(usable, 95)
  const ms = (values: readonly number[]): string => `${percentile(values, 50).toFixed(1)} / ${percentile(values, 95).toFixed(1)} ms`
  process.stdout.write(
    [
      `devices agent --dra (installed CLI) on a real kubelet v1.37.2 + containerd 2.4.2 with kube-scheduler and kube-controller-manager: ${cycles} hot-plug cycles (${toSlice.length + toTaint.length} changes), ${podCount} claim and ${podCount} limit pods, ${replugs} re-plugs, a second node with ${podCount} claim pods, ${rssPods} pods`,
      row('add uevent → listed in the ResourceSlice on a watch, p50 / p95', ms(toSlice), `budget p95 <= 250 ms: ${verdict(sliceP95 <= 250)}`),
      row('remove uevent → tainted unplugged on a watch, p50 / p95', ms(toTaint), `budget p95 <= 250 ms: ${verdict(taintP95 <= 250)}`),
      ...podStartRows('claim pod created → read in it, p50 / p95', byClaim, startP95s[0]!, ` ${startBudgetWhy}`),
      ...podStartRows('limit pod created → read in it, p50 / p95', byLimit, startP95s[1]!, ''),
      row('re-plug → read in the container, p50 / p95', ms(usable), `budget p95 <= 50 ms: ${verdict(usableP95 <= 50)}; max ${Math.max(...usable).toFixed(1)} ms`),
      row('  of which: add uevent → "devices updated"', ms(granted), `(the grant applied; ${granted.length} of ${replugs} found)`),
      row('second node: start → Ready', `${(nodeBReadyMs / 1000).toFixed(1)} s`, '(containerd, the image imported, kubelet registered and Ready)'),
      row('  its kubelet + containerd RSS', `${nodeBRssAtReady.toFixed(0)} MB`, `(at Ready; ${nodeBRssAfterPods.toFixed(0)} MB after its ${podCount} pods)`),
      ...podStartRows('claim pod on the second node created → read', onNodeB, startP95s[2]!, ''),
      row(`RSS with ${rssPods} pods (device plugin + DRA)`, `${memory.rssMb.toFixed(0)} MB`, `budget <= 100 MB: ${verdict(memory.rssMb <= 100)} (peak ${memory.peakMb.toFixed(0)} MB)`),
    ].join('\n') + '\n',
  )
  process.exitCode = sliceP95 <= 250 && taintP95 <= 250 && startP95s.every((p95) => p95 <= startBudgetMs) && usableP95 <= 50 && memory.rssMb <= 100 ? 0 : 1
} finally {
  await stopNodeB().catch((error: Error) => log(error.message))
  await agent?.stop('SIGTERM')
  stopSlices.abort()
  await slices.stop()
  await netlink.stop()
  await unplugAll()
  await env.close()
}

interface PodObject {
  metadata: {name: string; uid: string}
  spec?: {nodeName?: string}
  status?: {phase?: string}
}

/** A pod of the benchmark, its container `main` holding the claim `disk`; deleted at once when done with. */
function claimPod(name: string, options: ClaimPodOptions): object {
  return claimPodManifest(name, env.node.name, {...options, terminationGracePeriodSeconds: 0})
}

/** A pod on the node whose container `main` asks by resource limit for one of `resource` (a device plugin's, or a DRA class's extended resource). */
function limitPod(name: string, resource: string, command: readonly string[] = ['sleep', '36000']): object {
  return limitPodManifest(name, resource, {command, nodeName: env.node.name, terminationGracePeriodSeconds: 0})
}

/** A container command that reads the disk at /dev/loop<index> as it starts (retrying every millisecond), writes `marker`, then sleeps. */
function readsThenSleeps(index: number, marker: string): string[] {
  return ['sh', '-c', `until [ "$(dd if=/dev/loop${index} bs=13 count=1 status=none 2>/dev/null)" = "${loopData(index)}" ]; do usleep 1000; done; echo ${marker}; exec sleep 36000`]
}

/** Binds the disk's backing file (BackedLoops' own) to /dev/loop<index>, as BackedLoops.add does after its add. */
async function bindLoop(index: number): Promise<void> {
  const backing = join(env.dir, `backing-${index}`)
  await writeFile(backing, loopData(index).padEnd(4096, '.'))
  await promisify(execFile)('losetup', [`/dev/loop${index}`, backing])
}

/** Stops the second node's agent, unplugs its disk, stops the node; throws when the node left something on the host. Idempotent. */
async function stopNodeB(): Promise<void> {
  const b = nodeB
  nodeB = undefined
  if (b === undefined) return
  await b.agent?.stop('SIGTERM')
  await loops.drop(nodeBLoop).catch((error: Error) => log(`loop${nodeBLoop}: ${error.message}`))
  await b.node.stop()
  const left = await b.node.host.leftovers()
  if (left.length > 0) throw new Error(`bench:dra: the second node left things on the host: ${left.join('; ')}`)
}

/** A pod-start figure's rows: created → read against the budget, then where the time went. */
function podStartRows(figure: string, starts: readonly PodStart[], readP95: number, why: string): string[] {
  const msWhole = (values: readonly number[]): string => `${percentile(values, 50).toFixed(0)} / ${percentile(values, 95).toFixed(0)} ms`
  const prepared = starts.flatMap((s) => (s.preparedMs === undefined ? [] : [s.preparedMs]))
  return [
    row(figure, msWhole(starts.map((s) => s.readMs)), `budget p95 <= ${startBudgetMs} ms: ${verdict(readP95 <= startBudgetMs)}${why}`),
    row('  created → scheduled (claim made, allocated)', msWhole(starts.map((s) => s.scheduledMs)), '(polled every 20 ms)'),
    row('  created → the agent\'s "claim prepared"', prepared.length === 0 ? '-' : msWhole(prepared), `(${prepared.length} of ${starts.length} found)`),
    row('  created → Running in the API', msWhole(starts.map((s) => s.runningMs)), "(kubelet's status manager posts it)"),
  ]
}
