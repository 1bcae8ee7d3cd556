import type {Device, DeviceClass} from '../devices/types.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import {ociDeviceRules, ruleDeviceId, rulesWithout, type OciDeviceCgroup} from '../runtime/device-program.js'
import type {HeldAccess, V2Program} from './access-applier.js'
import {criLabels, requestOfContainer, ruleOf, wantedAccess, type ContainerRequest, type DeviceAccess} from './container-access.js'
import {deviceOfGrant, type RecordedGrant} from './grant-record.js'

/** A running container a batch looks at, and what its pod asks for it. */
export interface ContainerWork {
  readonly container: RuntimeContainer
  /** Its init process. */
  readonly pid: number
  readonly request: ContainerRequest
  /**
   * It asks for a class, admitted or not: the class devices in its cgroup are then the agent's to manage (a
   * grant made before the policy, or lost from the record, is taken back too).
   */
  readonly asked: boolean
  /** The stable IDs of its prepared claims' devices, per DRA class. */
  readonly claimed?: ReadonlyMap<string, readonly string[]>
}

/** A container's devices by ResourceClaim, per DRA class (stable IDs); undefined when it holds no claim. */
export type ClaimedDevices = (container: RuntimeContainer) => ReadonlyMap<string, readonly string[]> | undefined

export interface WorkInput {
  /** containerd's workload containers (no sandboxes). */
  readonly containers: readonly RuntimeContainer[]
  /** The running tasks' init PIDs, by container id. */
  readonly running: ReadonlyMap<string, number>
  /** The node's pods' container requests, by requestKey. */
  readonly requests: ReadonlyMap<string, ContainerRequest>
  /**
   * Containers that may hold class devices the agent gave (an annotation edited away: what they were given
   * is taken back); undefined looks at every running container, as the first batch does.
   */
  readonly mayHold: ReadonlySet<string> | undefined
  /** The devices each container holds by ResourceClaim (with the DRA driver on). */
  readonly claimed?: ClaimedDevices
}

/**
 * Pure: the running containers to reconcile: those that ask for classes (by limit or annotation in their
 * pod, or by a claim prepared for it), and those that may still hold some.
 */
export function containersToReconcile(input: WorkInput): ContainerWork[] {
  const work: ContainerWork[] = []
  for (const container of input.containers) {
    const pid = input.running.get(container.id)
    const l = container.labels
    if (pid === undefined || l[criLabels.kind] === 'sandbox') continue
    const claimed = input.claimed?.(container)
    const asked = requestOfContainer(l, input.requests)
    const request =
      claimed === undefined || claimed.size === 0
        ? asked
        : {...(asked ?? requestOfLabels(l)), classes: new Map([...(asked?.classes ?? []), ...[...claimed.keys()].map((name) => [name, 'claim'] as const)])}
    if (request !== undefined) work.push({asked: request.classes.size > 0, claimed, container, pid, request})
    else if (input.mayHold === undefined || input.mayHold.has(container.id)) work.push({asked: false, container, pid, request: requestOfLabels(l)})
  }
  return work
}

/** A container's request as its CRI labels name it, asking for nothing (yet). */
function requestOfLabels(l: Readonly<Record<string, string>>): ContainerRequest {
  return {classes: new Map(), container: l[criLabels.container] ?? '', namespace: l[criLabels.namespace] ?? '', pod: l[criLabels.pod] ?? '', podUid: l[criLabels.podUid] ?? ''}
}

export interface ContainerPlanInput {
  /** What the access policy admitted of its request. */
  readonly request: ContainerRequest
  readonly asked: boolean
  readonly classes: ReadonlyMap<string, DeviceClass>
  /** The devices of each class present now. */
  readonly members: ReadonlyMap<string, readonly Device[]>
  /** Device allocation by limit: the stable IDs kubelet gave it, per class. */
  readonly allocated: ReadonlyMap<string, readonly string[]>
  /** A device that has been in a class since the agent started, by id. */
  readonly known: (id: string) => Device | undefined
  /** What the agent recorded granting it. */
  readonly recorded: readonly RecordedGrant[]
  /** Its OCI spec's device cgroup rules. */
  readonly ociDevices?: readonly OciDeviceCgroup[]
}

/** One container's plan: which device rules it should have, which are the runtime's, which are the agent's. */
export interface ContainerPlan {
  /** The class devices it should have now, by device id. */
  readonly wanted: ReadonlyMap<string, DeviceAccess>
  /** Rules its runtime gave (never revoked): its OCI spec's specific allows when it asks for nothing. */
  readonly base: ReadonlySet<string>
  /** The device of a rule that is the agent's to manage, undefined for every other rule. */
  readonly managed: (id: string) => Device | undefined
}

/**
 * Pure. The agent's rules are those it recorded granting the container (so that a device unplugged while it
 * was away is still taken back, and its node removed where it was made) and, while the container asks for
 * classes, every class device: kubelet's Allocate put them in its spec, and the agent withdraws an unplugged
 * one and gives it back when it returns. Everything else is the runtime's. A container that asks for
 * nothing (any more) keeps whatever its OCI spec allows, class devices included (a device given another way).
 */
export function planContainer(input: ContainerPlanInput): ContainerPlan {
  const recorded = new Map(input.recorded.map((g) => [ruleDeviceId(g), g]))
  const base = new Set(
    input.asked
      ? []
      : ociDeviceRules(input.ociDevices)
          .filter((r) => r.allow && r.type !== 'a' && r.major !== '*' && r.minor !== '*')
          .map(ruleDeviceId),
  )
  return {
    base,
    managed: (id) => {
      const device = input.asked ? input.known(id) : undefined
      const grant = recorded.get(id)
      return grant === undefined ? device : {...(device ?? deviceOfGrant(grant)), devNode: grant.devNode}
    },
    wanted: wantedAccess(input),
  }
}

/**
 * Pure: the cgroup v2 program to attach in place of the one read: its own rules without the agent's
 * devices, then every class device granted. Undefined when there is no program (v1, or a hybrid host).
 */
export function programAfter(held: HeldAccess, granting: ReadonlyMap<string, DeviceAccess>, base: ReadonlySet<string>): V2Program | undefined {
  if (held.program === undefined) return undefined
  const ours = new Set([...held.devices.keys()].filter((id) => !base.has(id)))
  return {replaces: held.program.id, rules: [...rulesWithout(held.program.rules, ours), ...[...granting.values()].map((a) => ({...ruleOf(a), allow: true}))]}
}
