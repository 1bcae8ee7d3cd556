import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {Logger} from '../observe/logger.js'
import type {ClaimDeviceStatus, DeviceCondition} from './device-health.js'

interface ClaimKey {
  readonly uid: string
  readonly namespace: string
  readonly name: string
}

/**
 * Writes the driver's entries of ResourceClaims' status.devices (server-side apply on the status
 * subresource, one field manager per node, so that only this node's entries are ever replaced), only when
 * they changed since the last write that succeeded. An empty apply takes this node's entries back.
 */
export class ClaimStatusWriter {
  readonly #written = new Map<string, string>()
  /** The conditions last written per claim and device: their transition times carry over. */
  readonly #conditions = new Map<string, Map<string, DeviceCondition>>()
  #queue: Promise<void> = Promise.resolve()

  constructor(
    private readonly client: KubeClient,
    readonly nodeName: string,
    private readonly logger: Logger,
    private readonly onError: () => void,
    /** A write failed: the caller writes every claim's status again later. */
    private readonly onFailed: () => void,
  ) {}

  /** The conditions last written for a claim, by device. */
  conditions(uid: string): ReadonlyMap<string, DeviceCondition> {
    return this.#conditions.get(uid) ?? new Map()
  }

  /** Writes a claim's entries (none: takes them back); serialised, so an older write never lands after a newer one. */
  write(claim: ClaimKey, devices: readonly ClaimDeviceStatus[]): Promise<void> {
    this.#queue = this.#queue.then(() => this.#write(claim, devices)).catch(() => {})
    return this.#queue
  }

  async #write(claim: ClaimKey, devices: readonly ClaimDeviceStatus[]): Promise<void> {
    const key = JSON.stringify(devices)
    if (this.#written.get(claim.uid) === key) return
    try {
      await this.client.request('PATCH', `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(claim.namespace)}/resourceclaims/${encodeURIComponent(claim.name)}/status`, {
        body: {apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: {name: claim.name, namespace: claim.namespace, uid: claim.uid}, status: {devices}},
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: `nfdctl-dra-${this.nodeName}`, force: true},
      })
    } catch (error) {
      // The claim is gone (deleted with its pod): nothing to report on.
      if (isStatus(error, 'NotFound') || isStatus(error, 'Conflict')) {
        this.#forget(claim.uid)
        return
      }
      this.#written.delete(claim.uid)
      this.onError()
      this.logger.warn({claim: `${claim.namespace}/${claim.name}`, err: errorMessage(error)}, "cannot write the claim's device status; trying again in 5 s")
      this.onFailed()
      return
    }
    if (devices.length === 0) {
      this.#forget(claim.uid)
      return
    }
    this.#written.set(claim.uid, key)
    this.#conditions.set(claim.uid, new Map(devices.map((d) => [d.device, d.conditions[0]])))
  }

  #forget(uid: string): void {
    this.#written.delete(uid)
    this.#conditions.delete(uid)
  }
}
