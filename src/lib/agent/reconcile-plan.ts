import {deviceOfNumber, ownedBy, ownedId, type OwnedDevice} from '../devices/owned-devices.js'
import {claimMarkerDir} from '../devices/resource-names.js'
import type {Device, DeviceClass} from '../devices/types.js'
import type {OciSpec, RuntimeContainer} from '../runtime/containerd-client.js'
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
   * It asks for a class, admitted or not: a device of those classes in its cgroup that its spec does not name
   * is then the agent's to manage (a grant made before the policy, or lost from the record, is taken back too).
   */
  readonly asked: boolean
  /** The classes its pod asks for it (by limit, annotation or claim), admitted or not. */
  readonly askedFor?: readonly string[]
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
    if (request !== undefined) work.push({asked: request.classes.size > 0, askedFor: [...request.classes.keys()], claimed, container, pid, request})
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
  /** The classes its pod asks for, admitted or not (ContainerWork.askedFor). */
  readonly askedFor?: readonly string[]
  readonly classes: ReadonlyMap<string, DeviceClass>
  /** The devices of each class present now. */
  readonly members: ReadonlyMap<string, readonly Device[]>
  /** Device allocation by limit: the stable IDs kubelet gave it, per class. */
  readonly allocated: ReadonlyMap<string, readonly string[]>
  /** A device that has been in a class since the agent started, by id (its details). */
  readonly known: (id: string) => Device | undefined
  /** An owned device number (OwnedDevices), by id: the classes it was a device of. */
  readonly owned: (id: string) => OwnedDevice | undefined
  /** What the agent recorded granting it. */
  readonly recorded: readonly RecordedGrant[]
  /** Its OCI spec's device cgroup rules (`linux.resources.devices`). */
  readonly ociDevices?: readonly OciDeviceCgroup[]
  /** Its OCI spec's device nodes (`linux.devices`): those kubelet's device plugins and CDI specs made. */
  readonly ociNodes?: OciDeviceNodes
}

/** The device nodes of an OCI spec. */
export type OciDeviceNodes = NonNullable<NonNullable<OciSpec['linux']>['devices']>

/** One container's plan: which device rules it should have, which are the runtime's, which are the agent's. */
export interface ContainerPlan {
  /** The class devices it should have now, by device id (never one of the runtime's). */
  readonly wanted: ReadonlyMap<string, DeviceAccess>
  /** The devices its runtime gave (never revoked, never unlinked): every device its OCI spec names that is not the agent's. */
  readonly base: ReadonlySet<string>
  /** The device of a rule that is the agent's to manage, undefined for every other rule. */
  readonly managed: (id: string) => Device | undefined
}

/** What a container's OCI spec gives it, by device id: the specific allow rules, the device nodes with their paths. */
export interface SpecDevices {
  readonly allows: ReadonlySet<string>
  readonly nodes: ReadonlyMap<string, readonly string[]>
}

/** Pure: the devices an OCI spec names (wildcard rules name none). */
export function specDevices(ociDevices: readonly OciDeviceCgroup[] = [], ociNodes: OciDeviceNodes = []): SpecDevices {
  const allows = new Set(
    ociDeviceRules(ociDevices)
      .filter((r) => r.allow && r.type !== 'a' && r.major !== '*' && r.minor !== '*')
      .map(ruleDeviceId),
  )
  const nodes = new Map<string, string[]>()
  for (const n of ociNodes) {
    if ((n.type !== 'b' && n.type !== 'c') || n.major === undefined || n.minor === undefined) continue
    const id = `${n.type}${n.major}:${n.minor}`
    nodes.set(id, [...(nodes.get(id) ?? []), n.path])
  }
  return {allows, nodes}
}

/**
 * The devices the OCI runtime spec has every Linux container's runtime supply: null, zero, full, random,
 * urandom, tty, console, ptmx.
 */
const ociStandardDevices: ReadonlySet<string> = new Set(['c1:3', 'c1:5', 'c1:7', 'c1:8', 'c1:9', 'c5:0', 'c5:1', 'c5:2'])

/**
 * Pure: the devices of a spec that the runtime gives by itself, whatever else gave them too: the OCI
 * standard devices (runc allows and makes them whether the spec lists them or not), and an allow rule at a
 * number no device node of the spec has (kubelet's DeviceSpecs and CDI's device nodes each bring a node with
 * their rule).
 */
export function runtimeDefaults(spec: SpecDevices): Set<string> {
  return new Set([...ociStandardDevices, ...[...spec.allows].filter((id) => !spec.nodes.has(id))])
}

/**
 * Pure. A device its OCI spec names is the runtime's (base) unless kubelet's Allocate or a CDI spec gave it
 * for a class the container holds by limit or claim: a node in the spec at a number that was a device of one
 * of those classes (OwnedDevices), and not one the runtime allows by itself (runtimeDefaults). The runtime's
 * are never revoked, unlinked or granted again, whatever a class, a record or an owned number says. The
 * agent's rules are those: the grants it recorded (a device unplugged while it was away is still taken
 * back, and its node removed where it was made); and, while the container asks for classes, a device of
 * one of those classes that its spec does not name (a grant lost from the record). A container that asks
 * for nothing (any more) keeps whatever its OCI spec gives, class devices included.
 */
export function planContainer(input: ContainerPlanInput): ContainerPlan {
  const recorded = new Map(input.recorded.map((g) => [ruleDeviceId(g), g]))
  const spec = specDevices(input.ociDevices, input.ociNodes)
  const defaults = runtimeDefaults(spec)
  const given = new Set([...input.request.classes].filter(([, via]) => via !== 'annotation').map(([name]) => name))
  const ours = new Map<string, Device>()
  for (const [id, paths] of spec.nodes) {
    const owned = input.owned(id)
    if (defaults.has(id) || owned === undefined || !ownedBy(owned, given)) continue
    ours.set(id, {...(input.known(id) ?? deviceOfNumber(owned)), devNode: paths.find((p) => !p.startsWith(`${claimMarkerDir}/`)) ?? paths[0]})
  }
  const base = new Set([...spec.allows, ...spec.nodes.keys(), ...defaults].filter((id) => !ours.has(id)))
  const askedFor = new Set(input.asked ? (input.askedFor ?? input.request.classes.keys()) : [])
  const askedClassDevice = (id: string): Device | undefined => {
    const owned = input.owned(id)
    return owned !== undefined && ownedBy(owned, askedFor) ? (input.known(id) ?? deviceOfNumber(owned)) : undefined
  }
  const wanted = new Map([...wantedAccess(input)].filter(([id]) => !base.has(id)))
  return {
    base,
    managed: (id) => {
      if (base.has(id)) return undefined
      const grant = recorded.get(id)
      if (grant !== undefined) return {...(input.known(id) ?? deviceOfGrant(grant)), devNode: grant.devNode}
      return ours.get(id) ?? wanted.get(id)?.device ?? askedClassDevice(id)
    },
    wanted,
  }
}

/** A listed container as the owned numbers see it: the classes it holds by limit or claim, the device nodes its spec has. */
export interface OwnedNumberHolder {
  readonly given: ReadonlySet<string>
  readonly nodes: () => Iterable<string>
}

/**
 * Pure: the owned numbers to keep: those a class has a device at now, and those a container holds as the
 * agent's (a node in its spec at a number of a class it holds by limit or claim: kubelet or CDI gave it, so
 * it is the agent's to take back). The rest no class matches and no container holds: forgotten, so a
 * number a class once had (/dev/null, say) is nobody's for ever after. A grant the agent made needs no
 * owned number (the grant record keeps it). `holders` is read only when a number is in no class.
 */
export function ownedToKeep(owned: readonly OwnedDevice[], members: ReadonlyMap<string, readonly Device[]>, holders: () => readonly OwnedNumberHolder[]): Set<string> {
  const keep = new Set([...members.values()].flatMap((devices) => devices.map((d) => d.id)))
  const loose = owned.filter((o) => !keep.has(ownedId(o)))
  if (loose.length === 0) return keep
  for (const holder of holders()) {
    if (holder.given.size === 0) continue
    const nodes = new Set(holder.nodes())
    for (const o of loose) if (nodes.has(ownedId(o)) && ownedBy(o, holder.given)) keep.add(ownedId(o))
  }
  return keep
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
