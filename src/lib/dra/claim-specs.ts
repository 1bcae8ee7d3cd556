import type {Device} from '../devices/types.js'
import {claimCdiSpec, removeClaimCdi, writeClaimCdi} from './claim-cdi.js'
import type {PreparedDevice} from './prepared-claims.js'

/** A device of a claim that is present now, with the device node it is. */
export interface PresentClaimDevice {
  readonly prepared: PreparedDevice
  readonly device: Device
}

/**
 * The claims' CDI specs in `cdiDir`, each written only when it differs from the one this process last wrote
 * (a re-plug gives new device numbers; most refreshes change nothing). Callers hold the claim's lock.
 */
export class ClaimSpecs {
  /** The spec last written per claim. */
  readonly #written = new Map<string, string>()

  constructor(readonly cdiDir: string) {}

  /**
   * Writes a claim's spec for the devices present and those awaited (unplugged, tolerated: their marker
   * only); none: the file is removed, as CDI has no empty spec.
   */
  async write(claimUid: string, present: readonly PresentClaimDevice[], awaited: readonly PreparedDevice[] = []): Promise<void> {
    const spec = claimCdiSpec(claimUid, present, awaited)
    const key = JSON.stringify(spec)
    if (this.#written.get(claimUid) === key) return
    await writeClaimCdi(this.cdiDir, claimUid, spec)
    this.#written.set(claimUid, key)
  }

  async remove(claimUid: string): Promise<void> {
    await removeClaimCdi(this.cdiDir, claimUid)
    this.#written.delete(claimUid)
  }
}
