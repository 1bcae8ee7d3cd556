import {setTimeout as sleep} from 'node:timers/promises'

import {droppedFeatureConditions, type DroppedFeatures} from '../devices/dropped-features.js'
import type {MemberRefusal} from '../devices/member-refusals.js'
import type {Device, DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import type {AgentMetrics} from './agent-metrics.js'
import type {ClassProblem} from '../devices/class-view.js'
import {nodeClassStatus, StatusWriter, type ClassReport} from './status-writer.js'

/** What one batch saw of the node's classes. */
export interface NodeClassesSeen {
  readonly classes: ReadonlyMap<string, DeviceClass>
  readonly invalid: readonly ClassProblem[]
  /** The devices of each class present now. */
  readonly members: ReadonlyMap<string, readonly Device[]>
  /** How many running containers hold each class. */
  readonly holding: ReadonlyMap<string, number>
  /** Devices the classes match but do not serve. */
  readonly refused?: readonly MemberRefusal[]
  /** What the API server drops of what the DRA driver writes: said on the DRA classes. */
  readonly dropped?: DroppedFeatures
  /** Why the node's runtime would not hand claims' devices to containers (runtime-cdi.ts): said in the DRA classes' node entries. */
  readonly runtimeProblem?: string
}

/**
 * Pure. Per class: the node's entry when the class applies here, and whether its spec is valid. A class
 * whose new spec is invalid keeps its entry at the generation still in use, and says so. A DRA class also
 * gets a condition for each feature the API server drops (droppedFeatureConditions), and in its node entry
 * the runtime's problem, if any (its claims are refused on this node).
 */
export function classReports(nodeName: string, seen: NodeClassesSeen): Map<string, ClassReport> {
  const reports = new Map<string, ClassReport>()
  for (const [name, deviceClass] of seen.classes) {
    const generation = deviceClass.metadata.generation
    const dropped = deviceClass.spec.allocation === 'DRA' && seen.dropped !== undefined ? droppedFeatureConditions(name, seen.dropped) : []
    reports.set(name, {
      condition: {generation, message: `the spec is valid and in use on node ${nodeName}`, valid: true},
      ...(dropped.length === 0 ? {} : {dropped}),
      entry: nodeClassStatus(
        nodeName,
        seen.members.get(name) ?? [],
        seen.holding.get(name) ?? 0,
        generation,
        (seen.refused ?? []).filter((r) => r.className === name),
        deviceClass.spec.allocation === 'DRA' && seen.runtimeProblem !== undefined ? [{message: seen.runtimeProblem, reason: 'RuntimeWithoutCDI'}] : [],
      ),
    })
  }
  for (const problem of seen.invalid) {
    const using = problem.using === undefined ? 'the class is not served' : `generation ${problem.using}, the last valid one, stays in use`
    reports.set(problem.name, {...reports.get(problem.name), condition: {generation: problem.generation, message: `invalid spec: ${problem.message}; ${using}`, valid: false}})
  }
  return reports
}

export interface StatusReporterOptions {
  readonly client: KubeClient
  readonly nodeName: string
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** Asks for another report later (the agent queues a batch); called after a failed write. */
  readonly retry: () => void
  /** The least time from one status write to the next; default 1 s. */
  readonly minIntervalMs?: number
}

/**
 * What the node reports after each batch: the per-class gauges at once, and the DeviceClasses' status
 * (StatusWriter) in the background, so that no batch waits for the API server: a report made while a write
 * is in flight replaces any waiting one and goes when that write ends, at most one write a `minIntervalMs`
 * (a device plugged in and out 20 times a second is not 20 writes a second, nor as many watch events on
 * every agent that follows the classes). A failed write is logged once per
 * change and retried with back-off (1 s doubling to 30 s: the API server may be away for long); any report
 * meanwhile tries as well.
 */
export class StatusReporter {
  readonly #writer: StatusWriter
  readonly #retry = new RetryTimer({backoff: {baseMs: 1000, maxMs: 30_000}})
  #ok = true
  #writing: Promise<void> | undefined
  #next: Map<string, ClassReport> | undefined
  readonly #stopping = new AbortController()

  constructor(readonly options: StatusReporterOptions) {
    this.#writer = new StatusWriter(options.client, options.nodeName)
  }

  report(seen: NodeClassesSeen): void {
    const {metrics} = this.options
    metrics.classContainers.reset()
    metrics.classDevices.reset()
    metrics.refusedDevices.reset()
    for (const r of seen.refused ?? []) metrics.refusedDevices.inc({class: r.className, reason: r.reason})
    for (const name of seen.classes.keys()) {
      metrics.classContainers.set({class: name}, seen.holding.get(name) ?? 0)
      metrics.classDevices.set({class: name}, seen.members.get(name)?.length ?? 0)
    }
    this.#next = classReports(this.options.nodeName, seen)
    this.#writing ??= this.#writeLatest()
  }

  async stop(): Promise<void> {
    this.#retry.stop()
    this.#next = undefined
    this.#stopping.abort()
    await this.#writing
  }

  async #writeLatest(): Promise<void> {
    const {logger, metrics} = this.options
    for (let reports = this.#next; reports !== undefined; reports = this.#next) {
      this.#next = undefined
      const started = performance.now()
      try {
        await this.#writer.write(reports)
        if (!this.#ok) logger.info({}, 'DeviceClass status written again')
        this.#ok = true
        this.#retry.succeeded()
      } catch (error) {
        metrics.errors.inc({kind: 'status'})
        if (this.#ok) logger.warn({err: errorMessage(error)}, 'cannot write DeviceClass status; retrying with back-off')
        this.#ok = false
        this.#writer.reset()
        this.#retry.failed(this.options.retry)
      }
      const waitMs = started + (this.options.minIntervalMs ?? 1000) - performance.now()
      if (this.#next !== undefined && waitMs > 0) await sleep(waitMs, undefined, {signal: this.#stopping.signal}).catch(() => {})
    }
    this.#writing = undefined
  }
}
