import {droppedFeatureConditions, type DroppedFeatures} from '../devices/dropped-features.js'
import type {MemberRefusal} from '../devices/member-refusals.js'
import {deviceClassApiVersion, type DeviceClass} from '../devices/types.js'
import type {Logger} from '../observe/logger.js'
import type {AgentMetrics} from './agent-metrics.js'
import {holderKey, type PolicyDecision} from './access-policy.js'
import {requestKey, type ContainerRequest} from './container-access.js'
import type {PodEvents} from './pod-events.js'

export interface RefusalNoticesOptions {
  readonly events: PodEvents
  readonly logger: Logger
  readonly metrics: AgentMetrics
}

/**
 * Tells the access policy's refusals: an Event on the pod (DeviceAccessRevoked when the container held the
 * class by annotation in the last batch, so the revoke has its reason; DeviceAccessRefused otherwise), a log
 * line and the metric. Each once while it lasts: until the pod goes or the class is admitted for it. A
 * namespace not in the cache yet is not told.
 */
export class RefusalNotices {
  /** The refusals already told, by holderKey and reason. */
  readonly #told = new Set<string>()
  /** The device refusals already told, by class, device, reason and message. */
  #toldDevices = new Set<string>()
  /** The dropped features already told, by class and reason. */
  #toldDropped = new Set<string>()
  /** The runtime's problem already told, by class and message, and as logged. */
  #toldRuntime = new Set<string>()
  #runtimeProblem: string | undefined

  constructor(readonly options: RefusalNoticesOptions) {}

  /** `holders`: the annotation grants of the last batch; `podUids`: the node's pods now. */
  tell(requests: readonly ContainerRequest[], decision: PolicyDecision, holders: ReadonlySet<string>, podUids: ReadonlySet<string>): void {
    for (const key of this.#told) {
      const [uid, container, name] = key.split('/')
      if (!podUids.has(uid) || decision.admitted.get(`${uid}/${container}`)?.classes.has(name)) this.#told.delete(key)
    }
    const {events, logger, metrics} = this.options
    for (const request of requests) {
      for (const refusal of decision.refused.get(requestKey(request)) ?? []) {
        const key = `${holderKey(request, refusal.class)}/${refusal.reason}`
        if (refusal.reason === 'namespace-pending' || this.#told.has(key)) continue
        this.#told.add(key)
        const revoked = holders.has(holderKey(request, refusal.class))
        // Names no class has are the pod author's to choose: one metric series for all of them.
        const known = refusal.reason !== 'unknown-class' && refusal.reason !== 'bad-annotation'
        metrics.requestsRefused.inc({class: known ? refusal.class : '(unknown)', reason: refusal.reason})
        logger.warn(
          {
            class: refusal.class,
            container: request.container,
            namespace: request.namespace,
            pod: request.pod,
            reason: refusal.reason,
          },
          `${revoked ? 'device access revoked' : 'device access refused'}: ${refusal.message}`,
        )
        events.warn(
          {name: request.pod, namespace: request.namespace, uid: request.podUid},
          revoked ? 'DeviceAccessRevoked' : 'DeviceAccessRefused',
          `container ${request.container}: ${refusal.message}`,
        )
      }
    }
  }

  /**
   * Devices a class matches but serves to nobody: an Event on the DeviceClass (DeviceRefused) and a log line,
   * each once while the refusal lasts; one that ends and comes back is told again.
   */
  tellDevices(refusals: readonly MemberRefusal[], classes: ReadonlyMap<string, DeviceClass>): void {
    const now = new Set<string>()
    for (const r of refusals) {
      const key = `${r.className}/${r.device.id}/${r.reason}/${r.message}`
      now.add(key)
      if (this.#toldDevices.has(key)) continue
      this.options.logger.warn({class: r.className, device: r.device.devNode, reason: r.reason}, `device refused: ${r.message}`)
      const uid = classes.get(r.className)?.metadata.uid
      this.options.events.warnAbout({apiVersion: deviceClassApiVersion, kind: 'DeviceClass', name: r.className, ...(uid === undefined ? {} : {uid})}, 'DeviceRefused', `${r.reason}: ${r.message}`)
    }
    this.#toldDevices = now
  }

  /**
   * What the API server drops, as an Event on each DRA class of the node (the reason and message of the
   * class's condition), once while it lasts; a class that becomes DRA later is told too.
   */
  tellDropped(dropped: DroppedFeatures, classes: ReadonlyMap<string, DeviceClass>): void {
    const now = new Set<string>()
    for (const [name, deviceClass] of classes) {
      if (deviceClass.spec.allocation !== 'DRA') continue
      for (const condition of droppedFeatureConditions(name, dropped)) {
        const key = `${name}/${condition.reason}`
        now.add(key)
        if (this.#toldDropped.has(key)) continue
        const uid = deviceClass.metadata.uid
        this.options.events.warnAbout({apiVersion: deviceClassApiVersion, kind: 'DeviceClass', name, ...(uid === undefined ? {} : {uid})}, condition.reason, condition.message)
      }
    }
    this.#toldDropped = now
  }

  /**
   * Why the node's runtime would not hand claims' devices to containers: a log line, and an Event on each DRA
   * class of the node (RuntimeWithoutCDI), once while it lasts.
   */
  tellRuntime(problem: string | undefined, classes: ReadonlyMap<string, DeviceClass>): void {
    if (problem !== this.#runtimeProblem && problem !== undefined) this.options.logger.warn({}, `claims are refused on this node: ${problem}`)
    this.#runtimeProblem = problem
    const now = new Set<string>()
    for (const [name, deviceClass] of problem === undefined ? [] : classes) {
      if (deviceClass.spec.allocation !== 'DRA') continue
      const key = `${name}/${problem}`
      now.add(key)
      if (this.#toldRuntime.has(key)) continue
      const uid = deviceClass.metadata.uid
      this.options.events.warnAbout({apiVersion: deviceClassApiVersion, kind: 'DeviceClass', name, ...(uid === undefined ? {} : {uid})}, 'RuntimeWithoutCDI', `${problem}`)
    }
    this.#toldRuntime = now
  }
}
