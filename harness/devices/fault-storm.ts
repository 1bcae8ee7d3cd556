import {mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {draDeviceName} from '../../src/lib/dra/resource-slices.js'
import {ContainerdClient, type RuntimeContainer} from '../../src/lib/runtime/containerd-client.js'
import {hasDevicePrograms} from '../../src/lib/runtime/device-bpf.js'
import {deviceControlOf} from '../../src/lib/runtime/device-cgroup.js'
import {allocatable, createNamespace, deletePods, waitForPod, type NodeEnv} from '../node/pods.js'
import {CliProcess} from '../process/cli-process.js'
import {waitFor} from '../process/wait.js'
import type {SeededRandom} from '../seeded-random.js'
import {checkDeviceInvariant, openAccessReader, type DeviceNumber, type Finding, type InvariantReport, type PresentDevice} from './device-invariant.js'
import {attachRuntimeProgram, runcDeviceRules} from './device-programs.js'
import {claimPodManifest, claimTemplateManifest, draAgentArgs, SerialDisks} from './dra-agent.js'
import {BackedLoops} from './loop-devices.js'

// A storm of plugs, unplugs, re-plugs and pod starts on the real node while `devices agent --dra` is
// SIGKILLed at random moments and started again; after every restart the device invariant is polled until it
// holds (or a deadline passes), and once more at the end. One seed gives one sequence of choices (the timing
// of the node still varies), so a failure's seed runs the same storm again.

export interface FaultStormOptions {
  readonly env: NodeEnv
  /** For the agent's state, its udev database and the loop devices' backing files. */
  readonly dir: string
  readonly random: SeededRandom
  readonly kills: number
  /** Names the classes, the namespace and the disks' serials. */
  readonly prefix: string
  /** The first of the 18 loop numbers the storm uses: 5 for a Class class, 5 for a Device class, 8 for a DRA class. */
  readonly loopBase: number
  /** Pods started in all (the first 6 before the storm). */
  readonly maxPods: number
  /** How long a restarted agent has to make the invariant hold. */
  readonly settleTimeoutMs: number
  /** The CLI to run: the sources (bin/dev.js) unless given, an installed bin/run.js for a benchmark. */
  readonly cli?: {readonly bin: string; readonly launch: 'node' | 'shebang'}
  readonly log: (line: string) => void
}

/** A finding, with what happened to its device number and its pod (the scenario that led to it). */
export interface StormFinding extends Finding {
  readonly kind: 'stray' | 'missing' | 'stale node'
  /** The check it was found by: after which restart, or at the end. */
  readonly check: string
  readonly scenario: readonly string[]
}

export interface FaultStormResult {
  readonly seed: number
  readonly kills: number
  /**
   * Kills after which the restarted agent made the invariant hold within the deadline (findings left at an
   * earlier deadline, already counted below, aside).
   */
  readonly killsSurvived: number
  /** Per restart that settled: from the new agent's spawn until the invariant held, ms. */
  readonly settleMs: readonly number[]
  /** The same for the restarts whose first check found something off (the agent had work to do). */
  readonly settleMsWithWork: readonly number[]
  /** Distinct findings (container and device) left when a deadline passed: each a broken invariant. */
  readonly stray: readonly StormFinding[]
  readonly missing: readonly StormFinding[]
  /** Device nodes a container is not entitled to, seen in settled checks (reported, not part of the invariant's rules). */
  readonly staleNodes: readonly StormFinding[]
  readonly actions: Readonly<Record<string, number>>
  /** Pods that kubelet refused or that failed (a limit pod admitted while the agent was down, out of devices). */
  readonly podsNotRunning: readonly string[]
}

type ClassKind = 'class' | 'device' | 'dra'
/** A disk of a class's, or one in none (x1, x2: what takes a number while the agent is down, in the downtime windows). */
type DiskKind = ClassKind | 'none'
/** Disk names per class (c1, d1, r1): every disk has a serial of its own, and the classes match their own letter's serials. */
const diskLetter: Record<DiskKind, string> = {class: 'c', device: 'd', dra: 'r', none: 'x'}

/** How a pod holds the number whose window is measured: by limit (of the Class class, or a Device class's device), by annotation, by claim. */
export type WindowPath = 'limit' | 'device' | 'annotation' | 'claim'
/** The pod of set-up that holds a disk by each path, and the kind of disk. */
const windowHolders: Record<WindowPath, {readonly pod: string; readonly kind: ClassKind}> = {
  annotation: {kind: 'class', pod: 'annotation-2'},
  claim: {kind: 'dra', pod: 'claim-5'},
  device: {kind: 'device', pod: 'device-3'},
  limit: {kind: 'class', pod: 'limit-1'},
}

export interface DowntimeWindows {
  /**
   * Per path: ms from the restarted agent's spawn until the pod that held disk D could no longer open D's
   * number, which disk G (in no class) took while the agent was down.
   */
  readonly windows: Readonly<Record<WindowPath, readonly number[]>>
  /** Per path: the rounds in which the agent's start sweep took the number (its log says so), not a later batch. */
  readonly swept: Readonly<Record<WindowPath, number>>
  /** Findings left after a round settled (none expected). */
  readonly stray: readonly StormFinding[]
  readonly missing: readonly StormFinding[]
}
type PodKind = 'limit' | 'annotation' | 'device' | 'claim'

interface Plugged {
  readonly disk: string
  readonly kind: DiskKind
}

export class FaultStorm {
  readonly #o: FaultStormOptions
  readonly #loops: BackedLoops
  readonly #disks: SerialDisks
  readonly #udevDir: string
  readonly #namespace: string
  readonly #classes: Record<ClassKind, string>
  readonly #ranges: Record<ClassKind, number[]>
  readonly #plugged = new Map<number, Plugged>()
  readonly #diskCount: Record<DiskKind, number> = {class: 0, device: 0, dra: 0, none: 0}
  readonly #history: string[] = []
  readonly #actions: Record<string, number> = {}
  readonly #pods: string[] = []
  readonly #started = performance.now()
  #agent: CliProcess | undefined
  #agentUp = false
  get #nullClass(): string {
    return `${this.#o.prefix}-null`
  }

  constructor(options: FaultStormOptions) {
    this.#o = options
    this.#loops = new BackedLoops(options.dir)
    this.#udevDir = join(options.dir, 'udev')
    this.#disks = new SerialDisks(this.#udevDir, options.prefix)
    this.#namespace = options.prefix
    this.#classes = {class: `${options.prefix}-class`, device: `${options.prefix}-device`, dra: `${options.prefix}-dra`}
    const range = (from: number, count: number): number[] => Array.from({length: count}, (_, i) => options.loopBase + from + i)
    this.#ranges = {class: range(0, 5), device: range(5, 5), dra: range(10, 8)}
  }

  /** Every loop number the storm may plug a disk in at. */
  get loopNumbers(): number[] {
    return Object.values(this.#ranges).flat()
  }

  /** The Class-allocation class (asked for by limit and by annotation). */
  get classClass(): string {
    return this.#classes.class
  }

  /** The namespace of the storm's pods: `limit-1`, `annotation-2` (with a sidecar), `device-3`, `device-4`, `claim-5` (with a sidecar), `claim-6`, then the storm's. */
  get namespace(): string {
    return this.#namespace
  }

  /** Classes, namespace, claim template, disks, the agent, and one pod of each kind (two of some), all running and settled. */
  async setUp(): Promise<void> {
    const {env} = this.#o
    await this.#cleanLoops()
    await mkdir(this.#udevDir, {recursive: true})
    await createNamespace(env, this.#namespace)
    // A class's own disks only: a disk in no class (x) at one of its numbers is in none.
    const loopMatch = (kind: ClassKind): object[] =>
      this.#ranges[kind].map((n) => ({devName: `loop${n}`, properties: {ID_SERIAL_SHORT: `${this.#disks.serialOf(diskLetter[kind])}*`}, subsystem: 'block'}))
    const classSpecs: Record<ClassKind, object> = {
      class: {allocation: 'Class', annotationAccess: {namespaceSelector: {}}, capacity: this.#o.maxPods, match: loopMatch('class')},
      device: {allocation: 'Device', match: loopMatch('device')},
      dra: {allocation: 'DRA', match: loopMatch('dra')},
    }
    for (const [kind, spec] of Object.entries(classSpecs)) {
      await env.client.request('POST', '/apis/devices.nfdctl.io/v1alpha1/deviceclasses', {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: this.#classes[kind as ClassKind]}, spec},
      })
    }
    // A class nobody asks for, of a device every container has from its runtime: /dev/null must stay theirs.
    await env.client.request('POST', '/apis/devices.nfdctl.io/v1alpha1/deviceclasses', {
      body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: this.#nullClass}, spec: {match: [{devName: 'null', subsystem: 'mem'}]}},
    })
    await env.client.request('POST', `/apis/resource.k8s.io/v1/namespaces/${this.#namespace}/resourceclaimtemplates`, {
      body: claimTemplateManifest('disk', `${this.#classes.dra}.devices.nfdctl.io`),
    })
    for (const kind of ['class', 'class', 'device', 'device', 'device', 'dra', 'dra', 'dra'] as const) await this.#plug(kind, this.#freeNumber(kind)!, this.#newDisk(kind))
    this.#agent = this.#spawnAgent()
    await this.#agent.waitForLine<{class?: string; state?: string}>('the device class plugins registered', (l) => l.class === this.#classes.device && l.state === 'registered', 60_000)
    await this.#agent.waitForLine<{msg: string}>('the DRA driver registered', (l) => l.msg.includes('registered with kubelet'), 60_000)
    await waitFor('the Device class allocatable', async () => (await allocatable(env, `devices.nfdctl.io/${this.#classes.device}`)) === 3, {timeoutMs: 30_000})
    await waitFor('the DRA DeviceClass', () => env.client.request('GET', `/apis/resource.k8s.io/v1/deviceclasses/${this.#classes.dra}.devices.nfdctl.io`).catch(() => undefined), {timeoutMs: 30_000})
    for (const [kind, sidecar] of [
      ['limit', false],
      ['annotation', true],
      ['device', false],
      ['device', false],
      ['claim', true],
      ['claim', false],
    ] as const)
      await this.#startPod(kind, sidecar)
    for (const pod of this.#pods) await waitForPod(env, `${this.#namespace}/${pod}`, 90_000)
    await this.#settledOrThrow('after set-up')
    if (await this.#attachRuntimePrograms(['limit-1', 'annotation-2', 'claim-5'])) await this.#settledOrThrow('after the runtime programs')
  }

  async #settledOrThrow(check: string): Promise<void> {
    const settled = await this.#settle(check, performance.now())
    if (settled.ms === undefined) throw new Error(`the node did not settle ${check}:\n${[...settled.report.stray, ...settled.report.missing].map((f) => f.text).join('\n')}`)
  }

  /**
   * On a hybrid host (whose runc restricts devices through v1 and attaches no program), what runc attaches on
   * a cgroup v2 host, from each container's spec, to the `main` containers of these pods, with the agent
   * stopped: the agent then keeps them in v2 mode (its program in the place of the runtime's, and the v1 rule),
   * so that kills land between those writes too. False where there is nothing to do (v1 or v2 only).
   */
  async #attachRuntimePrograms(pods: readonly string[]): Promise<boolean> {
    const containerd = new ContainerdClient({address: this.#o.env.node.containerd.socket, namespace: 'k8s.io'})
    try {
      const targets: Array<{dir: string; spec: RuntimeContainer['spec']}> = []
      for (const pod of pods) {
        const {containerId} = await waitForPod(this.#o.env, `${this.#namespace}/${pod}`)
        const pid = (await containerd.getTask(containerId))!.pid
        const control = await deviceControlOf(pid, {mode: 'v2'}).catch(() => undefined)
        if (control?.mode !== 'v2' || control.v1Dir === undefined || hasDevicePrograms(control.dir)) return false
        targets.push({dir: control.dir, spec: (await containerd.getContainer(containerId))?.spec})
      }
      await this.#agent!.stop('SIGTERM')
      this.#agentUp = false
      this.#note('agent stopped (SIGTERM) to attach runtime device programs')
      for (const {dir, spec} of targets) attachRuntimeProgram(dir, runcDeviceRules(spec, {tun: false}))
      this.#note(`runtime device programs attached to ${pods.map((p) => `${this.#namespace}/${p}/main`).join(', ')}`)
      this.#agent = this.#spawnAgent()
      return true
    } finally {
      containerd.close()
    }
  }

  /** The storm: `kills` SIGKILLs at random moments, each followed by a restart and a settled check; then the last check. */
  async run(): Promise<FaultStormResult> {
    const random = this.#o.random
    const settleMs: number[] = []
    const settleMsWithWork: number[] = []
    const found = new Map<string, StormFinding>()
    const stale = new Map<string, StormFinding>()
    let killsSurvived = 0
    let kills = 0
    let killsSinceSettle = 0
    const keep = (check: string, report: InvariantReport, into: Map<string, StormFinding>, kinds: Array<'stray' | 'missing' | 'stale node'>): void => {
      const lists = {missing: report.missing, 'stale node': report.staleNodes, stray: report.stray}
      for (const kind of kinds) {
        for (const f of lists[kind]) {
          const key = `${kind} ${f.container} ${f.device}`
          if (!into.has(key)) into.set(key, {...f, check, kind, scenario: this.#scenarioOf(f)})
        }
      }
    }
    while (kills < this.#o.kills) {
      // Up: actions until the kill, which lands at a random moment (during an action, a batch, a write).
      const killAfter = random.int(0, 1500)
      const cycleStart = performance.now()
      const killing = sleep(killAfter).then(() => this.#kill(++kills))
      while (performance.now() - cycleStart < killAfter) {
        await this.#randomAction()
        await sleep(random.int(0, 250))
      }
      await killing
      killsSinceSettle++
      // Down: what happens while no agent runs (a rolling update's gap).
      for (let i = random.int(0, 3); i > 0; i--) await this.#randomAction()
      let spawned = this.#restart()
      // Sometimes killed again while it starts, before it settled.
      if (kills < this.#o.kills && random.chance(0.25)) {
        await sleep(random.int(0, 2500))
        await this.#kill(++kills)
        killsSinceSettle++
        if (random.chance(0.5)) await this.#randomAction()
        spawned = this.#restart()
      }
      const check = `after kill ${kills}`
      const settled = await this.#settle(check, spawned, new Set(found.keys()))
      if (settled.ms === undefined) {
        keep(check, settled.report, found, ['stray', 'missing'])
      } else {
        settleMs.push(settled.ms)
        if (!settled.atOnce) settleMsWithWork.push(settled.ms)
        killsSurvived += killsSinceSettle
        keep(check, settled.report, stale, ['stale node'])
      }
      killsSinceSettle = 0
    }
    const last = await this.#settle('at the end', performance.now(), new Set(found.keys()))
    keep('at the end', last.report, found, ['stray', 'missing'])
    keep('at the end', last.report, stale, ['stale node'])
    const findings = [...found.values()]
    return {
      actions: {...this.#actions},
      kills,
      killsSurvived,
      missing: findings.filter((f) => f.kind === 'missing'),
      podsNotRunning: await this.#podsNotRunning(),
      seed: random.seed,
      settleMs,
      settleMsWithWork,
      staleNodes: [...stale.values()],
      stray: findings.filter((f) => f.kind === 'stray'),
    }
  }

  /**
   * The downtime window of each path, `rounds` times: with the node settled, the agent is SIGKILLed, the
   * holder's disk D is unplugged and disk G (in no class) plugged in at D's number, and the agent started
   * again; the holder's device rules are read every few milliseconds until it may no longer open the
   * number. Then the node must settle (G is nobody's), and D goes back to its number (the holder gets it
   * again). Run on the node as set-up left it (the holders are set-up's pods).
   */
  async measureWindows(rounds: number): Promise<DowntimeWindows> {
    const windows: Record<WindowPath, number[]> = {annotation: [], claim: [], device: [], limit: []}
    const swept: Record<WindowPath, number> = {annotation: 0, claim: 0, device: 0, limit: 0}
    const found = new Map<string, StormFinding>()
    const containerd = new ContainerdClient({address: this.#o.env.node.containerd.socket, namespace: 'k8s.io'})
    let kills = 0
    try {
      for (let round = 1; round <= rounds; round++) {
        for (const path of Object.keys(windowHolders) as WindowPath[]) {
          const {kind, pod} = windowHolders[path]
          const running = await waitForPod(this.#o.env, `${this.#namespace}/${pod}`)
          const pid = (await containerd.getTask(running.containerId))?.pid
          if (pid === undefined) throw new Error(`${pod} has no running task`)
          const access = await openAccessReader(pid)
          const held: number[] = []
          for (const [n, p] of this.#plugged) if (p.kind === kind && (await access({major: 7, minor: n, type: 'b'})) !== '') held.push(n)
          if (held.length === 0) throw new Error(`${pod} holds no disk of ${this.#classes[kind]} to measure the ${path} window with`)
          const n = this.#o.random.pick(held)
          const number = {major: 7, minor: n, type: 'b'} as const
          const {disk} = this.#plugged.get(n)!
          await this.#kill(++kills)
          await this.#unplug(n)
          await this.#plug('none', n, this.#newDisk('none'))
          if ((await access(number)) === '') throw new Error(`${pod} lost 7:${n} while the agent was down: nothing to measure`)
          const spawned = this.#restart()
          const closed = await waitFor(`${pod} no longer opens 7:${n}`, async () => ((await access(number)) === '' ? performance.now() : undefined), {
            intervalMs: 5,
            timeoutMs: this.#o.settleTimeoutMs,
          })
          windows[path].push(closed - spawned)
          const bySweep = await this.#agent!.waitForLine<{msg: string; revoked?: string[]}>(
            'the start sweep',
            (l) => l.msg.includes('taken back at start') && (l.revoked ?? []).includes(`/dev/loop${n}`),
            2000,
          ).then(
            () => true,
            () => false,
          )
          if (bySweep) swept[path]++
          this.#note(`${path} window: ${pod} could open 7:${n} (another disk's now) for ${Math.round(closed - spawned)} ms after the agent's spawn`)
          await this.#settleKeeping(`after the ${path} window, round ${round}`, found)
          await this.#unplug(n)
          await this.#plug(kind, n, disk)
          await this.#settleKeeping(`with disk ${disk} back, round ${round}`, found)
        }
      }
    } finally {
      containerd.close()
    }
    const findings = [...found.values()]
    return {missing: findings.filter((f) => f.kind === 'missing'), stray: findings.filter((f) => f.kind === 'stray'), swept, windows}
  }

  /** Waits for the node to settle; what is left at the deadline goes into `found`. */
  async #settleKeeping(check: string, found: Map<string, StormFinding>): Promise<void> {
    const {report} = await this.#settle(check, performance.now(), new Set(found.keys()))
    for (const [kind, list] of [
      ['stray', report.stray],
      ['missing', report.missing],
    ] as const) {
      for (const f of list) {
        const key = `${kind} ${f.container} ${f.device}`
        if (!found.has(key)) found.set(key, {...f, check, kind, scenario: this.#scenarioOf(f)})
      }
    }
  }

  /** The agent stopped, the pods, classes, template, namespace and disks removed. */
  async tearDown(): Promise<void> {
    const {env} = this.#o
    await this.#agent?.stop('SIGTERM')
    await deletePods(
      env,
      this.#pods.map((p) => `${this.#namespace}/${p}`),
    ).catch((error: Error) => this.#o.log(`deleting the storm's pods: ${error.message}`))
    for (const name of [...Object.values(this.#classes), this.#nullClass]) await env.client.request('DELETE', `/apis/devices.nfdctl.io/v1alpha1/deviceclasses/${name}`).catch(() => {})
    await env.client.request('DELETE', `/api/v1/namespaces/${this.#namespace}`).catch(() => {})
    await this.#cleanLoops()
  }

  /** The agent's output, for a failure's report. */
  transcript(): string {
    return this.#agent?.transcript() ?? '(no agent)'
  }

  async #cleanLoops(): Promise<void> {
    for (const n of this.loopNumbers) await this.#loops.drop(n)
    this.#plugged.clear()
  }

  #spawnAgent(): CliProcess {
    const {env, cli} = this.#o
    const args = draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(this.#o.dir, 'state'), udevDir: this.#udevDir})
    this.#agentUp = true
    this.#note('agent started')
    return cli === undefined ? new CliProcess(args) : new CliProcess(args, cli.bin, undefined, cli.launch)
  }

  /** Starts the agent again; resolves with the moment it was spawned. */
  #restart(): number {
    const at = performance.now()
    this.#agent = this.#spawnAgent()
    return at
  }

  async #kill(n: number): Promise<void> {
    const agent = this.#agent!
    await agent.stop('SIGKILL')
    this.#agentUp = false
    this.#note(`agent SIGKILLed (kill ${n})`)
  }

  /** Polls the invariant from `since` until it holds apart from `known` findings, or the deadline passes. */
  async #settle(check: string, since: number, known: ReadonlySet<string> = new Set()): Promise<{ms?: number; atOnce: boolean; report: InvariantReport}> {
    const deadline = since + this.#o.settleTimeoutMs
    for (let atOnce = true; ; atOnce = false) {
      const agent = this.#agent!
      let report: InvariantReport
      try {
        report = await checkDeviceInvariant({client: this.#o.env.client, node: this.#o.env.node, present: this.present(), watched: this.watched()})
      } catch (error) {
        // A read that failed (kubelet's PodResources slow on two busy cores) is tried again; only the deadline ends it.
        if (performance.now() > deadline) throw new Error(`the invariant could not be checked ${check}: ${(error as Error).message}`, {cause: error})
        this.#note(`check failed, tried again: ${(error as Error).message}`)
        await sleep(100)
        continue
      }
      const now = performance.now()
      const open = [...report.stray.map((f) => `stray ${f.container} ${f.device}`), ...report.missing.map((f) => `missing ${f.container} ${f.device}`)]
      const fresh = open.filter((key) => !known.has(key))
      if (fresh.length === 0) {
        this.#note(`settled ${check} in ${Math.round(now - since)} ms (${report.containers} containers)`)
        return {atOnce, ms: now - since, report}
      }
      if (now > deadline) {
        this.#note(`not settled ${check} within ${this.#o.settleTimeoutMs} ms: ${open.join('; ')}`)
        return {atOnce: false, report}
      }
      const end = await Promise.race([agent.ended, sleep(100)])
      if (end !== undefined) throw new Error(`the agent exited by itself (${end.signal ?? `code ${end.code}`}) ${check}\n${agent.transcript()}`)
    }
  }

  /** The disks plugged in now, as the storm plugged them (the checker's ground truth). */
  present(): PresentDevice[] {
    return [...this.#plugged].map(([n, p]) => {
      const stableId = this.#disks.stableIdOf(p.disk)
      return {classes: p.kind === 'none' ? [] : [this.#classes[p.kind]], devNode: `/dev/loop${n}`, draName: draDeviceName(stableId), label: `disk ${p.disk}`, major: 7, minor: n, stableId, type: 'b'}
    })
  }

  /** Every loop number the storm may use: what the checker looks for in the containers. */
  watched(): DeviceNumber[] {
    return this.loopNumbers.map((minor) => ({major: 7, minor, type: 'b'}))
  }

  async #randomAction(): Promise<void> {
    const random = this.#o.random
    const canStartPod = this.#pods.length < this.#o.maxPods
    const choice = random.pick<'unplug' | 'plug' | 'replug' | 'pod'>(['unplug', 'plug', 'plug', 'replug', 'replug', ...(canStartPod ? (['pod'] as const) : [])])
    this.#actions[choice] = (this.#actions[choice] ?? 0) + 1
    const pluggedNumbers = [...this.#plugged.keys()]
    switch (choice) {
      case 'unplug': {
        if (pluggedNumbers.length === 0) return
        await this.#unplug(random.pick(pluggedNumbers))
        return
      }
      case 'plug': {
        const kind = random.pick<ClassKind>(['class', 'device', 'dra'])
        const n = this.#freeNumber(kind)
        if (n !== undefined) await this.#plug(kind, n, this.#diskFor(kind))
        return
      }
      case 'replug': {
        if (pluggedNumbers.length === 0) return
        const n = random.pick(pluggedNumbers)
        const {kind, disk} = this.#plugged.get(n)!
        await this.#unplug(n)
        if (kind === 'none') return
        // Another disk at the same number (what a tenant's adapter does), or the same disk at another number.
        if (random.chance(0.5)) await this.#plug(kind, n, this.#diskFor(kind, disk))
        else await this.#plug(kind, this.#freeNumber(kind) ?? n, disk)
        return
      }
      case 'pod':
        await this.#startPod(random.pick<PodKind>(['limit', 'annotation', 'device', 'claim']), random.chance(0.5))
    }
  }

  #freeNumber(kind: ClassKind): number | undefined {
    const free = this.#ranges[kind].filter((n) => !this.#plugged.has(n))
    return free.length === 0 ? undefined : this.#o.random.pick(free)
  }

  #newDisk(kind: DiskKind): string {
    return `${diskLetter[kind]}${++this.#diskCount[kind]}`
  }

  /** A disk of the class's that is not plugged in (one seen before half the time), never `not`. */
  #diskFor(kind: ClassKind, not?: string): string {
    const pluggedDisks = new Set([...this.#plugged.values()].map((p) => p.disk))
    const known = Array.from({length: this.#diskCount[kind]}, (_, i) => `${diskLetter[kind]}${i + 1}`).filter((d) => d !== not && !pluggedDisks.has(d))
    return known.length > 0 && this.#o.random.chance(0.5) ? this.#o.random.pick(known) : this.#newDisk(kind)
  }

  async #plug(kind: DiskKind, n: number, disk: string): Promise<void> {
    await this.#disks.record(n, disk)
    await this.#loops.add(n)
    this.#plugged.set(n, {disk, kind})
    this.#note(`disk ${disk} (${this.#kindName(kind)}) plugged in at 7:${n}`)
  }

  async #unplug(n: number): Promise<void> {
    const {disk, kind} = this.#plugged.get(n)!
    await this.#loops.drop(n)
    await rm(join(this.#udevDir, `b7:${n}`), {force: true})
    this.#plugged.delete(n)
    this.#note(`disk ${disk} (${this.#kindName(kind)}) unplugged from 7:${n}`)
  }

  #kindName(kind: DiskKind): string {
    return kind === 'none' ? 'in no class' : this.#classes[kind]
  }

  async #startPod(kind: PodKind, sidecar: boolean): Promise<void> {
    const name = `${kind}-${this.#pods.length + 1}`
    const body = kind === 'claim' ? claimPodManifest(name, this.#o.env.node.name, {sidecar, template: 'disk', terminationGracePeriodSeconds: 0}) : this.#podManifest(name, kind, sidecar)
    await this.#o.env.client.request('POST', `/api/v1/namespaces/${this.#namespace}/pods`, {body})
    this.#pods.push(name)
    this.#note(`pod ${this.#namespace}/${name} created (${kind}${sidecar ? ', with a sidecar that asks for nothing' : ''})`)
  }

  #podManifest(name: string, kind: Exclude<PodKind, 'claim'>, sidecar: boolean): object {
    const limits = kind === 'limit' ? {[`devices.nfdctl.io/${this.#classes.class}`]: '1'} : kind === 'device' ? {[`devices.nfdctl.io/${this.#classes.device}`]: '1'} : undefined
    const container = (containerName: string, asks: boolean): object => ({
      command: ['sleep', '36000'],
      image: 'localhost/nfdctl-test/busybox:1',
      imagePullPolicy: 'Never',
      name: containerName,
      ...(asks && limits !== undefined ? {resources: {limits}} : {}),
    })
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {annotations: kind === 'annotation' ? {'devices.nfdctl.io/main': this.#classes.class} : undefined, name},
      spec: {
        automountServiceAccountToken: false,
        containers: [container('main', true), ...(sidecar ? [container('sidecar', false)] : [])],
        nodeName: this.#o.env.node.name,
        terminationGracePeriodSeconds: 0,
      },
    }
  }

  async #podsNotRunning(): Promise<string[]> {
    const pods = await this.#o.env.client.request<{items: Array<{metadata: {name: string}; status?: {phase?: string; reason?: string; message?: string}}>}>(
      'GET',
      `/api/v1/namespaces/${this.#namespace}/pods`,
    )
    return pods.items
      .filter((p) => p.status?.phase !== 'Running')
      .map((p) => `${p.metadata.name}: ${p.status?.phase ?? '?'}${p.status?.reason ? ` (${p.status.reason}${p.status.message ? `: ${p.status.message}` : ''})` : ''}`)
  }

  #note(event: string): void {
    const line = `${((performance.now() - this.#started) / 1000).toFixed(1)}s [agent ${this.#agentUp ? 'up' : 'down'}] ${event}`
    this.#history.push(line)
    if (process.env.NFDCTL_FAULT_TRACE) this.#o.log(line)
  }

  /**
   * What happened to the finding's device number and its pod, with the agent's kills and restarts between
   * (a run of them with nothing else between is shortened to its last kill and start).
   */
  #scenarioOf(finding: Finding): string[] {
    const minor = finding.device.split(':')[1]
    const pod = finding.container.split('/').slice(0, 2).join('/')
    const own = (line: string): boolean => line.includes(` 7:${minor}`) || line.includes(`pod ${pod} `)
    const agentLine = (line: string): boolean => line.includes('SIGKILL') || line.endsWith('agent started')
    const lines = this.#history.slice(Math.max(0, this.#history.findIndex(own))).filter((line) => own(line) || agentLine(line) || line.includes(finding.container))
    const story: string[] = []
    let run: string[] = []
    const flush = (): void => {
      const earlier = run.slice(0, -2).filter((line) => line.includes('SIGKILL')).length
      if (earlier > 0) story.push(`(${earlier} earlier kill(s) and restarts)`)
      story.push(...run.slice(-2))
      run = []
    }
    for (const line of lines) {
      if (agentLine(line)) run.push(line)
      else {
        flush()
        story.push(line)
      }
    }
    flush()
    // Long stories keep the pod's start and the device number's last events.
    const start = story.find((line) => line.includes(`pod ${pod} created`))
    const tail = story.slice(-13)
    return start === undefined || tail.includes(start) ? story.slice(-14) : [start, '…', ...tail]
  }
}

/** One line per finding with its scenario, for a failure message or a benchmark's log. */
export function describeFindings(findings: readonly StormFinding[]): string {
  return findings.map((f) => `- ${f.kind}, found ${f.check}: ${f.text}\n    ${f.scenario.join('\n    ')}`).join('\n')
}
