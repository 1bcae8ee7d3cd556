import type {Device} from '../devices/types.js'
import type {NodeWatchResourcesResponse} from '../kubelet/dra-api.js'
import {RetryTimer} from '../retry-timer.js'
import {claimDeviceStatuses, claimedOutsideClass, devicesHealth, type ClaimDeviceStatus, type DeviceCondition} from './device-health.js'
import type {PreparedClaim} from './prepared-claims.js'

/** Where claims' status.devices go (ClaimStatusWriter). */
export interface ClaimStatuses {
  write(claim: PreparedClaim, devices: readonly ClaimDeviceStatus[]): Promise<void>
  conditions(uid: string): ReadonlyMap<string, DeviceCondition>
}

export interface ClaimHealthOptions {
  readonly nodeName: string
  /** The claims prepared here now. */
  readonly claims: () => readonly PreparedClaim[]
  /** The pool's devices, by DRA device name. */
  readonly pool: () => ReadonlyMap<string, Device>
  /** Every device on the node, in a class or not. */
  readonly onNode: () => readonly Device[]
  readonly statuses: ClaimStatuses
  /** Sends every device's health on kubelet's open streams (the plugin server). */
  readonly push: () => void
  /** Wait before every claim's status is written again after a failed write; default 5 s. */
  readonly retryMs?: number
}

/**
 * The health of the pool's and the claims' devices, told two ways: kubelet's DRAResourceHealth stream (every
 * device, Unhealthy while a claimed device is unplugged or out of its class) and the claims' status.devices
 * conditions. A failed status write has every claim's status written again a little later.
 */
export class ClaimHealth {
  /** Devices of prepared claims that are on the node but out of their class (a class edit), not unplugged. */
  #outsideClass: ReadonlySet<string> = new Set()
  /** After a failed status write, every claim's status again: the same wait each time, one retry scheduled at a time. */
  readonly #retry: RetryTimer

  constructor(readonly options: ClaimHealthOptions) {
    const retryMs = options.retryMs ?? 5000
    this.#retry = new RetryTimer({backoff: {baseMs: retryMs, maxMs: retryMs}})
  }

  /** The pool changed: which claimed devices are out of their class is judged again. */
  recompute(): void {
    const {claims, onNode, pool} = this.options
    this.#outsideClass = claimedOutsideClass(claims(), pool(), onNode())
  }

  /** Every device's health, as kubelet's stream sends it. */
  health(): NodeWatchResourcesResponse {
    const now = Math.floor(Date.now() / 1000)
    return {
      devices: devicesHealth(this.options.pool(), this.options.claims(), this.#outsideClass).map((h) => ({
        device: {device_name: h.device, pool_name: this.options.nodeName},
        health: h.healthy ? 'HEALTHY' : 'UNHEALTHY',
        health_check_timeout_seconds: 0,
        last_updated_time: now,
        message: h.message,
      })),
    }
  }

  /** Tells kubelet's open streams. */
  push(): void {
    this.options.push()
  }

  /** Writes every prepared claim's status.devices for the devices now (only what changed reaches the API server). */
  writeStatuses(): void {
    const {claims, nodeName, pool, statuses} = this.options
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
    for (const claim of claims()) {
      void statuses.write(claim, claimDeviceStatuses(claim, nodeName, pool(), now, statuses.conditions(claim.uid), this.#outsideClass))
    }
  }

  /** Takes this node's entries of an unprepared claim's status back. */
  takeBack(claim: PreparedClaim): void {
    void this.options.statuses.write(claim, [])
  }

  /** A status write failed: every claim's status is written again after the retry wait (one timer at a time). */
  statusFailed(): void {
    if (!this.#retry.pending) this.#retry.failed(() => this.writeStatuses())
  }

  stop(): void {
    this.#retry.stop()
  }
}
