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
}
