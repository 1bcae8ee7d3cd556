import {deviceOfNumber, numbersWithAnotherDevice, ownedId, type OwnedDevice} from '../devices/owned-devices.js'
import {claimMarkerDir, envNameOf} from '../devices/resource-names.js'
import type {Device} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {runningPids, type ContainerdClient, type RuntimeContainer} from '../runtime/containerd-client.js'
import {ruleDeviceId} from '../runtime/device-program.js'
import {criLabels, workloadContainers} from './container-access.js'
import type {ContainerReconciler} from './container-reconciler.js'
import type {RecordedGrant} from './grant-record.js'
import {specDevices} from './reconcile-plan.js'

/** One container and the numbers to take from it at start. */
export interface SweepTarget {
  readonly container: RuntimeContainer
  readonly pid: number
  readonly devices: readonly Device[]
}

export interface SweepPlanInput {
  /** Owned numbers whose device went while the agent was away (numbersWithAnotherDevice). */
  readonly changed: readonly OwnedDevice[]
  /** containerd's workload containers and the running tasks' init PIDs. */
  readonly containers: readonly RuntimeContainer[]
  readonly running: ReadonlyMap<string, number>
  /** What the agent recorded granting a container. */
  readonly grants: (containerId: string) => readonly RecordedGrant[]
}

/** The marks nfdctl leaves in a container's spec: a claim's marker node (CDI), a class's variable (kubelet's Allocate). */
function givenByNfdctl(container: RuntimeContainer): boolean {
  const spec = container.spec
  return (spec?.linux?.devices ?? []).some((d) => d.path.startsWith(`${claimMarkerDir}/`)) || (spec?.process?.env ?? []).some((e) => e.startsWith(envNameOf('')))
}

/**
 * Pure: which running containers lose which numbers at start: an owned number whose device went while the
 * agent was away is nobody's to open now (no grant could reach the device that has it since: the agent, its
 * device plugins and its DRA driver were down), wherever a container got it from nfdctl: a grant the agent
 * recorded, or its spec when kubelet's Allocate or a claim's CDI spec put nfdctl's numbers there. The
 * runtime's own rules (a spec nfdctl left no mark in) are not touched.
 */
export function planStartSweep(input: SweepPlanInput): SweepTarget[] {
  if (input.changed.length === 0) return []
  const changed = new Map(input.changed.map((d) => [ownedId(d), d]))
  const targets: SweepTarget[] = []
  for (const container of input.containers) {
    const pid = input.running.get(container.id)
    if (pid === undefined || container.labels[criLabels.kind] === 'sandbox') continue
    const ours = new Set(input.grants(container.id).map(ruleDeviceId))
    if (givenByNfdctl(container)) for (const id of specDevices(container.spec?.linux?.resources?.devices).allows) ours.add(id)
    const devices = [...ours].flatMap((id) => {
      const owned = changed.get(id)
      return owned === undefined ? [] : [deviceOfNumber(owned)]
    })
    if (devices.length > 0) targets.push({container, devices, pid})
  }
  return targets
}

export interface StartSweepOptions {
  readonly containerd: Pick<ContainerdClient, 'listContainers' | 'listTasks'>
  readonly reconciler: Pick<ContainerReconciler, 'revoke'>
  readonly grants: (containerId: string) => readonly RecordedGrant[]
  /** The owned numbers as recorded, and the devices present now (the first scan done). */
  readonly owned: () => readonly OwnedDevice[]
  readonly present: () => readonly Device[]
  readonly logger: Logger
  /** How long containerd may take to list; past it the first batch does the work. */
  readonly timeoutMs?: number
}

/**
 * What the agent does at start before it waits on anything slow (the API server, kubelet): a number whose
 * device went while it was away, and that another device may have taken, is taken from the containers that
 * hold it through nfdctl (planStartSweep). Its first batch decides everything else, and gives back a number
 * whose new device a container may hold. Needs only the records, sysfs and containerd; a failure is said and
 * left to that batch. Resolves with how many rules were taken.
 */
export async function sweepAtStart(options: StartSweepOptions): Promise<number> {
  const {containerd, logger, reconciler} = options
  const changed = numbersWithAnotherDevice(options.owned(), options.present())
  if (changed.length === 0) return 0
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`containerd did not answer within ${options.timeoutMs ?? 3000} ms`)), options.timeoutMs ?? 3000)
  })
  try {
    const [containers, tasks] = await Promise.race([Promise.all([containerd.listContainers([workloadContainers]), containerd.listTasks()]), timeout])
    const running = runningPids(tasks)
    let taken = 0
    for (const target of planStartSweep({changed, containers, grants: options.grants, running})) {
      const {container} = target
      const pod = `${container.labels[criLabels.namespace] ?? ''}/${container.labels[criLabels.pod] ?? ''}`
      try {
        const revoked = await reconciler.revoke(container, target.pid, target.devices)
        taken += revoked.length
        if (revoked.length > 0) {
          logger.info({container: container.id.slice(0, 12), pod, revoked: revoked.map((d) => d.devNode)}, 'devices whose numbers another device may have now taken back at start')
        }
      } catch (error) {
        logger.warn({container: container.id.slice(0, 12), err: errorMessage(error), pod}, 'could not take back at start the numbers whose device went; the first batch does')
      }
    }
    return taken
  } catch (error) {
    logger.warn({err: errorMessage(error)}, "cannot list containerd's containers at start; the numbers whose device went while the agent was away are taken back by the first batch")
    return 0
  } finally {
    clearTimeout(timer)
  }
}
