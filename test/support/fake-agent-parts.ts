import {noneDropped, type DroppedFeatures} from '../../src/lib/devices/dropped-features.js'
import type {ClaimDriver, DevicePlugins, Readiness} from '../../src/lib/agent/agent-parts.js'
import type {NodeView} from '../../src/lib/agent/container-reconciler.js'
import type {ContainerPlanInput, ContainerWork} from '../../src/lib/agent/reconcile-plan.js'
import type {Device} from '../../src/lib/devices/types.js'
import type {SourceReport} from '../../src/lib/source-supervisor.js'

/**
 * Recording stand-ins for the parts the agent's cores take. Each writes what it was asked into `calls`
 * (shared between parts when a test checks their order) and answers what the test set.
 */
export type Calls = string[]

/** The kubelet device plugins (a PluginSet). */
export class FakePlugins implements DevicePlugins {
  readiness: Readiness = {ready: true, reason: 'plugins registered'}
  readonly published: string[][] = []
  constructor(readonly calls: Calls = []) {}
  async start(): Promise<void> {
    this.calls.push('plugins.start')
  }
  async stop(): Promise<void> {
    this.calls.push('plugins.stop')
  }
  status(): Readiness {
    return this.readiness
  }
  classesChanged(): void {
    this.calls.push('plugins.classesChanged')
  }
  publish(classes: ReadonlySet<string>): void {
    this.published.push([...classes])
  }
}

/** The DRA driver; `claims` is what claimed() answers, by container id. */
export class FakeClaimDriver implements ClaimDriver {
  readiness: Readiness = {ready: true, reason: 'DRA plugin registered'}
  readonly claims = new Map<string, ReadonlyMap<string, readonly string[]>>()
  readonly devicesChangedWith: string[][] = []
  flushes = 0
  constructor(readonly calls: Calls = []) {}
  async start(): Promise<void> {
    this.calls.push('dra.start')
  }
  async stop(): Promise<void> {
    this.calls.push('dra.stop')
  }
  status(): Readiness {
    return this.readiness
  }
  classesChanged(): void {
    this.calls.push('dra.classesChanged')
  }
  devicesChanged(classes: ReadonlySet<string>): void {
    this.devicesChangedWith.push([...classes])
  }
  flush(): void {
    this.flushes++
    this.calls.push('dra.flush')
  }
  claimed(container: {id: string}): ReadonlyMap<string, readonly string[]> | undefined {
    return this.claims.get(container.id)
  }
  /** What dropped() says: set by the test. */
  droppedFeatures: DroppedFeatures = noneDropped
  dropped(): DroppedFeatures {
    return this.droppedFeatures
  }
  /** What runtimeProblem() says: set by the test. */
  runtimeIssue: string | undefined
  runtimeProblem(): string | undefined {
    return this.runtimeIssue
  }
}

/** One container's apply, as NodeReconciler hands it to a ContainerReconciler. */
export interface Applied {
  readonly container: string
  readonly classes: string[]
  readonly allocated: Record<string, readonly string[]>
}

/**
 * The per-container apply (a ContainerReconciler) without cgroups: records each call, fails for the
 * containers in `failing`, and answers "still holds class devices" for the ones in `holding` (and for any
 * container it was asked to give a class).
 */
export class FakeApplier {
  readonly applied: Applied[][] = [[]]
  /** Every call in order: the container, and the class devices (ids) and members' generation it was given. */
  readonly given: Array<{container: string; generation: number; devices: Record<string, string[]>}> = []
  readonly failing = new Map<string, Error>()
  readonly holding = new Set<string>()
  retained: ReadonlySet<string> = new Set()

  /** Starts a new batch's list of calls. */
  nextBatch(): void {
    this.applied.push([])
  }

  get last(): Applied[] {
    return this.applied.at(-1) ?? []
  }

  async retain(listed: ReadonlySet<string>): Promise<void> {
    this.retained = listed
  }

  async reconcile(work: ContainerWork, node: NodeView, allocated: ContainerPlanInput['allocated']): Promise<boolean> {
    const id = work.container.id
    this.given.push({container: id, devices: Object.fromEntries([...node.members].map(([name, devices]) => [name, devices.map((d) => d.id)])), generation: node.generation})
    this.last.push({allocated: Object.fromEntries(allocated), classes: [...work.request.classes.keys()], container: id})
    const failure = this.failing.get(id)
    if (failure !== undefined) throw failure
    return this.holding.has(id) || work.request.classes.size > 0
  }
}

/** A supervisor's report on one source. */
export class FakeReport implements SourceReport {
  readonly said: string[] = []
  up(): void {
    this.said.push('up')
  }
  failed(error: unknown): void {
    this.said.push(`failed: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/** The uevent watcher: start() hands `initial` to its caller; events come from the test through the feed's signals. */
export class FakeDeviceWatcher {
  reopened = 0
  constructor(
    readonly initial: Device[] = [],
    readonly calls: Calls = [],
  ) {}
  async start(_signal: AbortSignal, onInitial?: (devices: Device[]) => void): Promise<Device[]> {
    this.calls.push('devices.start')
    onInitial?.(this.initial)
    return this.initial
  }
  async reopen(): Promise<void> {
    this.reopened++
  }
  async stop(): Promise<void> {
    this.calls.push('devices.stop')
  }
}
