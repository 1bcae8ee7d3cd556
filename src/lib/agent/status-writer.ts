import {deviceClassesPath} from '../devices/cluster-classes.js'
import type {ClassCondition} from '../devices/dropped-features.js'
import type {MemberRefusal} from '../devices/member-refusals.js'
import {deviceClassApiVersion, type Device} from '../devices/types.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'

/**
 * This node's entry in a DeviceClass's status.nodes. Who holds the class is a count: anyone who may read
 * classes may read their status, and the names of other tenants' namespaces, pods and containers are not
 * theirs to read (docs/security.md).
 */
export interface NodeClassStatus {
  readonly node: string
  readonly devices: ReadonlyArray<{id: string; devName: string; major: number; minor: number}>
  /** How many running containers on this node hold the class. */
  readonly holders: number
  /** Devices the class matches on this node but does not serve, and why; absent when there are none. */
  readonly refused?: ReadonlyArray<{id: string; devName: string; reason: MemberRefusal['reason']; message: string}>
  /** What keeps this node from serving the class as asked, whatever the device; absent when nothing does. */
  readonly problems?: ReadonlyArray<NodeProblem>
  readonly observedGeneration?: number
}

/** A reason this node cannot serve a class as asked, beyond any one device (RuntimeWithoutCDI). */
export interface NodeProblem {
  readonly reason: 'RuntimeWithoutCDI'
  readonly message: string
}

export function nodeClassStatus(
  node: string,
  devices: readonly Device[],
  holders: number,
  generation?: number,
  refused: readonly MemberRefusal[] = [],
  problems: readonly NodeProblem[] = [],
): NodeClassStatus {
  return {
    devices: [...devices].sort((a, b) => a.id.localeCompare(b.id)).map((d) => ({devName: d.devName, id: d.id, major: d.major, minor: d.minor})),
    holders,
    node,
    observedGeneration: generation,
    ...(refused.length === 0
      ? {}
      : {refused: [...refused].sort((a, b) => a.device.id.localeCompare(b.device.id)).map((r) => ({devName: r.device.devName, id: r.device.id, message: r.message, reason: r.reason}))}),
    ...(problems.length === 0 ? {} : {problems: [...problems]}),
  }
}

/** The class-wide condition `Valid`: whether the spec could be used, as this node's agent saw it. */
export interface ValidCondition {
  readonly valid: boolean
  readonly message: string
  readonly generation?: number
}

/**
 * What this node says about one class: its own entry (when the class applies to it), the Valid condition,
 * and the class-wide conditions of what the cluster's API server drops (absent while it drops nothing).
 */
export interface ClassReport {
  readonly entry?: NodeClassStatus
  readonly condition?: ValidCondition
  readonly dropped?: readonly ClassCondition[]
}

/**
 * Writes what the node says about each class with server-side apply, one field manager per node
 * (`nfdctl-agent-<node>`): status.nodes is a list-map keyed by node, so agents on other nodes keep their
 * entries, and conditions a list-map keyed by type, which agents that agree own together. A report is
 * written only when it changed since the last write that succeeded; a class reported before and not now
 * gets an empty apply, which takes back what this node had written there.
 */
export class StatusWriter {
  readonly #written = new Map<string, string>()
  /** When each class's Valid condition last changed its status, as this agent saw it. */
  readonly #transitions = new Map<string, {valid: boolean; at: string}>()
  /** When each class's dropped-feature conditions (by class and type) appeared, as this agent saw it. */
  readonly #droppedSince = new Map<string, string>()

  constructor(
    private readonly client: KubeClient,
    readonly node: string,
  ) {}

  /** Returns the classes whose report was written now. */
  async write(reports: ReadonlyMap<string, ClassReport>, signal?: AbortSignal): Promise<string[]> {
    const written: string[] = []
    const gone = [...this.#written.keys()].filter((name) => !reports.has(name))
    for (const [name, report] of [...reports, ...gone.map((name): [string, ClassReport] => [name, {}])]) {
      const key = JSON.stringify(report)
      if (this.#written.get(name) === key) continue
      const now = timestamp()
      const status: Record<string, unknown> = {}
      if (report.entry !== undefined) status.nodes = [{...report.entry, lastUpdateTime: now}]
      const conditions = [...(report.condition === undefined ? [] : [this.#conditionOf(name, report.condition, now)]), ...(await this.#droppedConditions(name, report.dropped ?? [], now, signal))]
      if (conditions.length > 0) status.conditions = conditions
      try {
        await this.client.request('PATCH', `${deviceClassesPath}/${encodeURIComponent(name)}/status`, {
          body: {apiVersion: deviceClassApiVersion, kind: 'DeviceClass', metadata: {name}, status},
          contentType: 'application/apply-patch+yaml',
          query: {fieldManager: `nfdctl-agent-${this.node}`, force: true},
          signal,
        })
      } catch (error) {
        // A class from a --class-file that the cluster does not have, or one just deleted: nothing to write to.
        if (!reports.has(name) && isStatus(error, 'Invalid')) await this.#removeEntry(name, signal)
        else if (!isStatus(error, 'NotFound')) throw error
      }
      if (reports.has(name)) this.#written.set(name, key)
      else this.#written.delete(name)
      written.push(name)
    }
    return written
  }

  /**
   * Takes this node's entry back without releasing its fields of the Valid condition. The empty apply releases
   * them, and the API server refuses it when this node forced one of them last (agents differ in its message and
   * transition time) and another node still reports the class: the condition would lose a required field.
   */
  async #removeEntry(name: string, signal?: AbortSignal): Promise<void> {
    const path = `${deviceClassesPath}/${encodeURIComponent(name)}/status`
    const current = await this.client.request<{status?: {nodes?: Array<{node?: string}>}}>('GET', `${deviceClassesPath}/${encodeURIComponent(name)}`, {signal})
    const index = current.status?.nodes?.findIndex((entry) => entry.node === this.node) ?? -1
    if (index < 0) return
    // The test makes a list that moved meanwhile a refusal (retried with the next report), never another node's entry removed.
    const body = [
      {op: 'test', path: `/status/nodes/${index}/node`, value: this.node},
      {op: 'remove', path: `/status/nodes/${index}`},
    ]
    await this.client.request('PATCH', path, {body, contentType: 'application/json-patch+json', query: {fieldManager: `nfdctl-agent-${this.node}`}, signal})
  }

  /** Forgets what was written, so that everything is written again (after the API server was away). */
  reset(): void {
    for (const name of this.#written.keys()) this.#written.set(name, '')
  }

  /**
   * The conditions with the time each first appeared; one that went and came back has a new time. A condition
   * new to this agent takes the time another node's agent already wrote for it: the nodes then own the same
   * value together, and one that stops saying it (its API server view changed) never takes the time away from
   * the others' condition (the API server would refuse the condition without it).
   */
  async #droppedConditions(name: string, conditions: readonly ClassCondition[], now: string, signal?: AbortSignal): Promise<object[]> {
    const types = new Set(conditions.map((c) => c.type))
    for (const key of this.#droppedSince.keys()) if (key.startsWith(`${name}/`) && !types.has(key.slice(name.length + 1))) this.#droppedSince.delete(key)
    const fresh = conditions.filter((c) => !this.#droppedSince.has(`${name}/${c.type}`))
    const current =
      fresh.length === 0
        ? []
        : await this.client
            .request<{status?: {conditions?: Array<{type?: string; status?: string; lastTransitionTime?: string}>}}>('GET', `${deviceClassesPath}/${encodeURIComponent(name)}`, {signal})
            .then(
              (c) => c.status?.conditions ?? [],
              () => [],
            )
    return conditions.map((c) => {
      const key = `${name}/${c.type}`
      const since = this.#droppedSince.get(key) ?? current.find((w) => w.type === c.type && w.status === c.status)?.lastTransitionTime ?? now
      this.#droppedSince.set(key, since)
      return {...c, lastTransitionTime: since}
    })
  }

  #conditionOf(name: string, condition: ValidCondition, now: string): object {
    let transition = this.#transitions.get(name)
    if (transition?.valid !== condition.valid) {
      transition = {at: now, valid: condition.valid}
      this.#transitions.set(name, transition)
    }
    return {
      lastTransitionTime: transition.at,
      message: condition.message,
      observedGeneration: condition.generation,
      reason: condition.valid ? 'SpecValid' : 'InvalidSpec',
      status: condition.valid ? 'True' : 'False',
      type: 'Valid',
    }
  }
}

function timestamp(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z')
}
