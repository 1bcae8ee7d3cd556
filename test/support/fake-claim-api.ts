import type {ResourceClaimObject} from '../../src/lib/dra/claim-preparation.js'
import type {ReadClaim} from '../../src/lib/dra/claim-reader.js'

/**
 * The API server's ResourceClaims as the DRA driver reads them: claims by namespace and name, a read that
 * fails for a claim it is told to, and reads held until the test releases them (to order kubelet's calls).
 */
export class FakeClaimApi {
  readonly #claims = new Map<string, ResourceClaimObject>()
  readonly #failures = new Map<string, Error>()
  readonly #held = new Map<string, Promise<void>>()
  /** Every read, `namespace/name`, in order. */
  readonly reads: string[] = []

  readonly read: ReadClaim = async (namespace, name) => {
    const key = `${namespace}/${name}`
    this.reads.push(key)
    await this.#held.get(key)
    const failure = this.#failures.get(key)
    if (failure !== undefined) throw failure
    return this.#claims.get(key)
  }

  put(claim: ResourceClaimObject): void {
    this.#claims.set(`${claim.metadata.namespace}/${claim.metadata.name}`, claim)
  }

  /** Reads of this claim fail with `error`. */
  fail(namespace: string, name: string, error: Error): void {
    this.#failures.set(`${namespace}/${name}`, error)
  }

  /** Reads of this claim wait until the returned function is called. */
  hold(namespace: string, name: string): () => void {
    let release = (): void => {}
    this.#held.set(
      `${namespace}/${name}`,
      new Promise<void>((resolve) => {
        release = resolve
      }),
    )
    return () => {
      this.#held.delete(`${namespace}/${name}`)
      release()
    }
  }
}
