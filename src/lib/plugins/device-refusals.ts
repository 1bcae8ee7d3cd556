import type {MemberRefusal} from '../devices/member-refusals.js'
import type {Logger} from '../observe/logger.js'
import {Gauge, type Registry} from '../observe/prometheus.js'

/**
 * What plugins serve says of the devices its classes match and do not serve (it has no class status to
 * write: the agent's RefusalNotices do that): a log line for each, once while the refusal lasts (one that
 * ends and comes back is told again), and the gauge nfdctl_plugin_refused_devices by class and reason.
 */
export class DeviceRefusals {
  readonly #gauge: Gauge<'class' | 'reason'>
  #told = new Set<string>()

  constructor(
    readonly logger: Logger,
    registry: Registry,
  ) {
    this.#gauge = new Gauge({
      help: 'Devices a class matches on this node but serves to nobody, by reason: ExclusiveOverlap, DuplicateIdentity, HostCritical',
      labelNames: ['class', 'reason'],
      name: 'nfdctl_plugin_refused_devices',
      registers: [registry],
    })
  }

  /** The refusals as they are now (ClassMembers' refusals()). */
  tell(refusals: readonly MemberRefusal[]): void {
    const now = new Set<string>()
    this.#gauge.reset()
    for (const r of refusals) {
      this.#gauge.inc({class: r.className, reason: r.reason})
      const key = `${r.className}/${r.device.id}/${r.reason}/${r.message}`
      now.add(key)
      if (!this.#told.has(key)) this.logger.warn({class: r.className, device: r.device.devNode, reason: r.reason}, `device refused: ${r.message}`)
    }
    this.#told = now
  }
}
