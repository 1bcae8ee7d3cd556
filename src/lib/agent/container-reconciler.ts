import type {Device} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {ContainerGoneError, ContainerHandle, type CheckedProcess, type ContainerHandleOptions} from '../runtime/container-handle.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import {hasDevicePrograms} from '../runtime/device-bpf.js'
import type {CgroupMode} from '../runtime/device-cgroup.js'
import {applyAccess, currentAccess, UnsupportedProgramError, type HeldAccess} from './access-applier.js'
import type {AgentMetrics} from './agent-metrics.js'
import {diffAccess} from './container-access.js'
import {grantsAfter, grantsBefore, type GrantRecord, type RecordedGrant} from './grant-record.js'
import {planContainer, programAfter, type ContainerPlan, type ContainerPlanInput, type ContainerWork} from './reconcile-plan.js'
import {KeyedQueue} from '../keyed-queue.js'

export interface ContainerReconcilerOptions {
  /** Which device control to change: auto decides per container (v2 when its cgroup2 directory has a device program). */
  readonly cgroupMode: CgroupMode
  /** What the agent granted each container, written before a grant is made. */
  readonly grants: GrantRecord
  readonly logger: Logger
  readonly metrics: AgentMetrics
  /** A container was skipped: its process is gone or not its own (every time, for the agent's readiness). */
  readonly onSkipped?: (error: ContainerGoneError) => void
}

/** What a batch knows of the node's classes and devices, the same for every container. */
export type NodeView = Pick<ContainerPlanInput, 'classes' | 'members' | 'known' | 'owned'> & {
  /** When containerd last said something of a container: a new answer, something may have changed it. */
  readonly touchedAt: (containerId: string) => number
  /**
   * OwnedDevices.generation: a number that becomes the agent's (or a class's) may already be in a container
   * found as planned before, which must then be looked at again.
   */
  readonly ownedGeneration: number
  /**
   * ClassMembers.generation when `members` was read: a container given a newer reading (by the device lane)
   * is not taken back to an older one by a batch that read the members before it.
   */
  readonly generation: number
}

/**
 * Applies one container's plan through a handle that pins it while it changes (its init process by pidfd,
 * its root fd, its device cgroup checked against its OCI spec). A container whose process went away, or
 * whose PID is no longer its, is skipped (told once) and looked at again in the next batch: nothing is
 * written through it. Grants are recorded before they are made: an agent that stops in between still knows
 * them as its own.
 */
export class ContainerReconciler {
  readonly #log: Logger
  /** What is known of each listed container between batches. */
  readonly #seen = new Map<string, Seen>()
  /** The reconcile running on each container: a batch and the device lane never change one container at once. */
  readonly #busy = new KeyedQueue()
  /** The grant record failed to write (said once until it works again). */
  #recordFailing = false

  constructor(readonly options: ContainerReconcilerOptions) {
    this.#log = options.logger
  }

  /** Forgets containers that are no longer listed, in the record too. */
  async retain(listed: ReadonlySet<string>): Promise<void> {
    await this.#record(() => this.options.grants.retain(listed))
    for (const id of this.#seen.keys()) if (!listed.has(id)) this.#seen.delete(id)
  }

  /**
   * Gives the container exactly its wanted class devices; true when it may hold any of the agent's afterwards.
   * Calls for one container run one after the other; one whose members are older than those the container
   * was last given changes nothing (the batch that follows the newer reading looks again).
   */
  reconcile(work: ContainerWork, node: NodeView, allocated: ContainerPlanInput['allocated']): Promise<boolean> {
    return this.#busy.run(work.container.id, () => this.#reconcile(work, node, allocated))
  }

  /**
   * Takes these devices' rules (and nodes) from the container, whatever they are now, and nothing else: what
   * the agent does at start for numbers whose device went while it was away, before it knows who asks for
   * what. Resolves with the devices taken; a container whose process is gone is left to the batches.
   */
  revoke(container: RuntimeContainer, pid: number, devices: readonly Device[]): Promise<Device[]> {
    return this.#busy.run(container.id, async () => {
      const byId = new Map(devices.map((d) => [d.id, d]))
      const seen = this.#seen.get(container.id)
      if (seen !== undefined) seen.settled = undefined
      let handle: ContainerHandle
      try {
        handle = await ContainerHandle.open(container, pid, {hasDeviceProgram, mode: this.options.cgroupMode})
      } catch (error) {
        if (error instanceof ContainerGoneError) return []
        throw error
      }
      try {
        const held = await currentAccess(handle.control, (id) => byId.get(id))
        const change = {grant: [], revoke: [...held.devices.values()]}
        if (change.revoke.length === 0) return []
        const recorded = this.options.grants.grants(container.id)
        try {
          await applyAccess(handle, change, programAfter(held, new Map(), new Set()))
        } finally {
          this.options.metrics.ruleChanges.inc({action: 'revoke'}, change.revoke.length)
        }
        await this.#record(() => this.options.grants.set(container.id, grantsAfter(recorded, held.devices, change)))
        return change.revoke.map((a) => a.device)
      } finally {
        handle.close()
      }
    })
  }

  async #reconcile(work: ContainerWork, node: NodeView, allocated: ContainerPlanInput['allocated']): Promise<boolean> {
    const {container, request} = work
    const seen = this.#seen.get(container.id) ?? {}
    this.#seen.set(container.id, seen)
    if (seen.generation !== undefined && node.generation < seen.generation) return seen.settled?.holds ?? true
    seen.generation = node.generation
    const plan = planContainer({
      ...node,
      allocated,
      asked: work.asked,
      askedFor: work.askedFor,
      ociDevices: container.spec?.linux?.resources?.devices,
      ociNodes: container.spec?.linux?.devices,
      recorded: this.options.grants.grants(container.id),
      request,
    })
    const key = (): string => settledKey(work, node, plan.wanted, this.options.grants.grants(container.id))
    if (seen.settled !== undefined && seen.settled.key === key()) return seen.settled.holds
    seen.settled = undefined
    try {
      const ofProcess = seen.process?.pid === work.pid ? seen.process : undefined
      const handle = await ContainerHandle.open(container, work.pid, {
        checked: ofProcess?.checked,
        devVerdict: ofProcess?.devVerdict,
        hasDeviceProgram,
        mode: this.options.cgroupMode,
        rootVerdict: seen.rootVerdict,
      })
      seen.rootVerdict = handle.rootVerdict
      if (handle.rootProblem !== undefined && work.asked && !seen.rootTold) {
        seen.rootTold = true
        this.options.metrics.errors.inc({kind: 'container-root'})
        this.#log.warn(
          {container: container.id, err: handle.rootProblem, pod: `${request.namespace}/${request.pod}`},
          'no device node is made in the container: its root is not its own; its device rules still follow its classes',
        )
      }
      try {
        const {asPlanned, holds} = await this.#reconcileHandle(handle, work, plan, seen)
        seen.gone = false
        if (asPlanned) seen.settled = {holds, key: key()}
        return holds
      } finally {
        seen.process = {checked: handle.checked, devVerdict: handle.root.devVerdict, pid: work.pid}
        handle.close()
      }
    } catch (error) {
      if (!(error instanceof ContainerGoneError)) throw error
      this.options.onSkipped?.(error)
      if (!seen.gone) {
        seen.gone = true
        this.#log.warn({container: container.id, err: error.message, pod: `${request.namespace}/${request.pod}`}, 'container skipped: its process is gone or not its own; the next batch looks again')
      }
      return true
    }
  }

  /** `asPlanned`: the container has exactly the plan's devices now, and the record says so. */
  async #reconcileHandle(handle: ContainerHandle, {asked, container, request}: ContainerWork, plan: ContainerPlan, seen: Seen): Promise<{holds: boolean; asPlanned: boolean}> {
    const {grants, metrics} = this.options
    const recorded = grants.grants(container.id)
    let held: HeldAccess
    try {
      held = await currentAccess(handle.control, plan.managed)
    } catch (error) {
      if (!(error instanceof UnsupportedProgramError)) throw error
      // A container that asks for nothing and was given nothing is not the agent's business, whatever program it has.
      if ((asked || recorded.length > 0) && !seen.unsupported) {
        seen.unsupported = true
        metrics.errors.inc({kind: 'unsupported-cgroup'})
        this.#log.warn({container: container.id, err: error.message}, "cannot change the container's device program; its devices are left as they are")
      }
      return {asPlanned: false, holds: false}
    }
    let change = diffAccess(held.devices, plan.wanted, plan.base, held.partial)
    if (change.grant.length === 0 && change.revoke.length === 0) {
      const kept = grantsAfter(recorded, held.devices, change)
      const written = await this.#record(() => grants.set(container.id, kept))
      return {asPlanned: written, holds: plan.wanted.size > 0 || kept.length > 0}
    }
    let granting = plan.wanted
    if (change.grant.length > 0 && !(await this.#record(async () => grants.setNow(container.id, grantsBefore(recorded, change))))) {
      const notRecorded = new Set(change.grant.map((a) => a.device.id))
      granting = new Map([...plan.wanted].filter(([id]) => !notRecorded.has(id)))
      change = {grant: [], revoke: change.revoke}
    }
    try {
      await applyAccess(handle, change, programAfter(held, granting, plan.base))
    } catch (error) {
      // A container gone meanwhile is told as such (reconcile), not as a cgroup error.
      if (!(error instanceof ContainerGoneError)) metrics.errors.inc({kind: 'cgroup'})
      throw error
    } finally {
      metrics.ruleChanges.inc({action: 'grant'}, change.grant.length)
      metrics.ruleChanges.inc({action: 'revoke'}, change.revoke.length)
    }
    this.#log.info(
      {
        cgroup: handle.control.mode,
        container: container.id.slice(0, 12),
        granted: change.grant.map((a) => `${a.device.devNode} ${a.access}`),
        pod: `${request.namespace}/${request.pod}`,
        revoked: change.revoke.map((a) => a.device.devNode),
        workload: request.container,
      },
      'devices updated',
    )
    // Written after this turn of the event loop: the grant is made and recorded already.
    const after = grantsAfter(grants.grants(container.id), held.devices, change)
    const written = await this.#record(() => grants.set(container.id, after))
    return {asPlanned: written && granting === plan.wanted, holds: granting.size > 0 || after.length > 0}
  }

  /**
   * Writes the grant record; false when it cannot be written (told once until it can again). The record
   * in memory stays right: the next write that succeeds has it.
   */
  async #record(write: () => Promise<void>): Promise<boolean> {
    try {
      await write()
      if (this.#recordFailing) this.#log.info({file: this.options.grants.file}, 'the record of granted devices is written again')
      this.#recordFailing = false
      return true
    } catch (error) {
      this.options.metrics.errors.inc({kind: 'state'})
      if (!this.#recordFailing) this.#log.error({err: errorMessage(error), file: this.options.grants.file}, 'cannot write the record of granted devices; no device is granted until it can be')
      this.#recordFailing = true
      return false
    }
  }
}

/** What the reconciler keeps of one container between batches. */
interface Seen {
  /** Its device program cannot be read: told once. */
  unsupported?: boolean
  /** Its process was gone (or not its own) when looked at: told once. */
  gone?: boolean
  /**
   * What was found of its init process, once per process (pinned by pidfd, so the PID is that process's):
   * its /dev as judged (its own, or a volume), as judging reads the host's mount table, which waits for
   * every mount and unmount on the node; and its device cgroup, checked against its OCI spec, as reading
   * /proc/<pid>/cgroup takes the kernel's cgroup lock, which runc holds while it builds a pod's cgroups.
   */
  process?: {readonly pid: number; readonly checked?: CheckedProcess; readonly devVerdict?: ContainerHandleOptions['devVerdict']}
  /** NodeView.generation of the members it was last given. */
  generation?: number
  /** Its rootfs on the host (or why it was not found) and the verdict on its root: mount tables read once. */
  rootVerdict?: ContainerHandleOptions['rootVerdict']
  /** Its root is not its rootfs: told once. */
  rootTold?: boolean
  /**
   * It was found exactly as planned, and what that plan was made of (settledKey): the same plan again, with no
   * containerd event of it since, is not looked at. Its cgroup and /proc files take the kernel's cgroup lock,
   * which pods starting and stopping hold often; a batch about another pod or another class's device must not
   * wait for it. An event of the container (an update of its resources, which rewrites its device rules, say)
   * or a new connection to containerd looks again.
   */
  settled?: {readonly key: string; readonly holds: boolean}
}

/** What a container's plan is made of: the same again, with no containerd event between, needs no look. */
function settledKey(work: ContainerWork, node: NodeView, wanted: ContainerPlan['wanted'], recorded: readonly RecordedGrant[]): string {
  const touchedAt = node.touchedAt(work.container.id)
  return JSON.stringify([work.pid, work.asked, touchedAt, node.ownedGeneration, [...wanted].map(([id, a]) => [id, a.access, a.device.devNode]), recorded])
}

/** For --cgroup-mode auto; a host where bpf(2) is refused has no program the agent could replace anyway. */
function hasDeviceProgram(dir: string): boolean {
  try {
    return hasDevicePrograms(dir)
  } catch {
    return false
  }
}
