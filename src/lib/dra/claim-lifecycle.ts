import type {ClassMembers} from '../devices/class-members.js'
import type {Device} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import {parseClaimMarker} from './claim-cdi.js'
import type {ClaimHealth} from './claim-health.js'
import {prepareClaim} from './claim-preparation.js'
import type {ReadClaim} from './claim-reader.js'
import type {ClaimSpecs, PresentClaimDevice} from './claim-specs.js'
import type {DraMetrics} from './dra-metrics.js'
import type {ClaimRef, NodePrepareResourcesResponse, NodeUnprepareResourcesResponse} from '../kubelet/dra-api.js'
import type {PreparedClaim, PreparedClaims} from './prepared-claims.js'
import type {PoolMember} from './resource-slices.js'
import {KeyedQueue} from '../keyed-queue.js'

export interface ClaimLifecycleOptions {
  readonly nodeName: string
  /** The record of prepared claims under --state-dir. */
  readonly record: PreparedClaims
  readonly specs: ClaimSpecs
  readonly readClaim: ReadClaim
  /** The node's classes and the devices of each present now. */
  readonly members: Pick<ClassMembers, 'classes' | 'of'>
  /** The pool's devices, by DRA device name. */
  readonly pool: () => ReadonlyMap<string, Device>
  /** The pool's unplugged devices (listed, tainted), by DRA device name. */
  readonly unplugged?: () => ReadonlyMap<string, PoolMember>
  /** Where a claim prepared or unprepared is told: kubelet's health stream and the claims' status. */
  readonly health: Pick<ClaimHealth, 'push' | 'takeBack' | 'writeStatuses'>
  readonly metrics: DraMetrics
  readonly logger: Logger
  /** The devices a container may hold changed (a claim prepared or unprepared). */
  readonly onClaimsChanged: () => void
  /** Awaited before a claim's CDI spec is written: its device numbers are recorded as the agent's. */
  readonly beforePrepare?: () => Promise<void>
  /**
   * Why no claim can be prepared on this node now (the runtime would not hand its devices to the containers),
   * read before each call; every claim of the call is then answered with it (kubelet shows it on the pod).
   */
  readonly refusal?: () => Promise<string | undefined>
}

/**
 * kubelet's claims on this node: prepare (the claim read, its devices checked, recorded, a CDI spec written)
 * and unprepare (record and spec removed), one claim's calls never interleaved with each other or with its
 * spec's rewrite; a claim recorded already is answered from the record. An error of one claim is that
 * claim's answer, never the call's. Recorded claims that no longer exist are dropped (forgetGone).
 */
export class ClaimLifecycle {
  /** Kubelet's prepare and unprepare of a claim, the rewrite of its CDI spec and its clean-up never interleave. */
  readonly #locks = new KeyedQueue()
  readonly #log: Logger
  #stopped = false

  constructor(readonly options: ClaimLifecycleOptions) {
    this.#log = options.logger
  }

  /** The claims prepared here now. */
  claims(): PreparedClaim[] {
    return this.options.record.all()
  }

  /** Reads the record; a damaged one is said and set aside (kubelet prepares its claims again as pods start). */
  async load(): Promise<void> {
    const {metrics, record} = this.options
    try {
      await record.load()
    } catch (error) {
      metrics.errors.inc({kind: 'state'})
      this.#log.warn({err: errorMessage(error), file: record.file}, 'the record of prepared claims cannot be used; kubelet prepares its claims again as pods start')
    }
    metrics.preparedClaims.set(record.all().length)
  }

  /** No more clean-up of gone claims. */
  stop(): void {
    this.#stopped = true
  }

  async prepare(claims: readonly ClaimRef[]): Promise<NodePrepareResourcesResponse> {
    const response: NodePrepareResourcesResponse = {claims: {}}
    const started = performance.now()
    // Read once per call, under the first claim's lock: a call's claims keep their order with others' calls.
    let refusal: Promise<string | undefined> | undefined
    const refused = (): Promise<string | undefined> => (refusal ??= this.options.refusal?.().catch(() => undefined) ?? Promise.resolve(undefined))
    for (const ref of claims) {
      try {
        const prepared = await this.#locks.run(ref.uid, async () => {
          const why = await refused()
          if (why !== undefined) throw new Error(`node ${this.options.nodeName}: ${why}`)
          return this.#prepareOne(ref)
        })
        response.claims[ref.uid] = {
          // kubelet matches a container's claim request by its base name (no `/subrequest`).
          devices: prepared.devices.map((d) => ({cdi_device_ids: [d.cdiId], device_name: d.device, pool_name: this.options.nodeName, request_names: [d.request.split('/')[0]]})),
          error: '',
        }
      } catch (error) {
        this.options.metrics.errors.inc({kind: 'prepare'})
        this.#log.warn({claim: `${ref.namespace}/${ref.name}`, err: errorMessage(error)}, 'cannot prepare claim')
        response.claims[ref.uid] = {devices: [], error: errorMessage(error)}
      }
    }
    this.options.metrics.prepareSeconds.observe((performance.now() - started) / 1000)
    return response
  }

  async unprepare(claims: readonly ClaimRef[]): Promise<NodeUnprepareResourcesResponse> {
    const {health, metrics, record} = this.options
    const response: NodeUnprepareResourcesResponse = {claims: {}}
    for (const ref of claims) {
      try {
        // Never prepared with such a UID, so nothing to remove.
        if (!claimUidPattern.test(ref.uid)) {
          response.claims[ref.uid] = {error: ''}
          continue
        }
        // Read under the lock: a prepare of the claim still running records it first.
        const prepared = await this.#locks.run(ref.uid, async () => {
          const recorded = record.get(ref.uid)
          await this.#forget(ref.uid)
          return recorded
        })
        if (prepared !== undefined) {
          health.takeBack(prepared)
          this.#log.info({claim: `${ref.namespace}/${ref.name}`}, 'claim unprepared')
        }
        response.claims[ref.uid] = {error: ''}
      } catch (error) {
        metrics.errors.inc({kind: 'unprepare'})
        response.claims[ref.uid] = {error: errorMessage(error)}
      }
    }
    metrics.preparedClaims.set(record.all().length)
    this.options.onClaimsChanged()
    health.push()
    return response
  }

  /**
   * Drops the recorded claims that no longer exist as prepared here (deleted, re-created under another UID):
   * kubelet unprepares a claim only while it knows of it, and one prepared before kubelet lost its checkpoint
   * would keep its spec, record and "unplugged" reports forever. A claim the API server still has is kept,
   * and so is one it cannot be asked about now.
   */
  async forgetGone(): Promise<void> {
    const {readClaim, record} = this.options
    for (const claim of record.all()) {
      const gone = await readClaim(claim.namespace, claim.name).then(
        (found) => found === undefined || found.metadata.uid !== claim.uid,
        () => false,
      )
      if (!gone || this.#stopped) continue
      await this.#locks.run(claim.uid, () => this.#forget(claim.uid)).catch(() => {})
      this.#log.info({claim: `${claim.namespace}/${claim.name}`}, 'recorded claim no longer exists; its CDI spec and record are removed')
    }
    this.options.metrics.preparedClaims.set(record.all().length)
  }

  /** Rewrites each prepared claim's CDI spec whose present devices changed (a re-plug gives new numbers). */
  async refreshSpecs(): Promise<void> {
    for (const claim of this.options.record.all()) {
      await this.#locks
        .run(claim.uid, () => this.#writeSpec(claim))
        .catch((error: unknown) => {
          this.options.metrics.errors.inc({kind: 'cdi'})
          this.#log.warn({claim: `${claim.namespace}/${claim.name}`, err: errorMessage(error)}, "cannot rewrite the claim's CDI spec")
        })
    }
  }

  /**
   * The devices a container holds by ResourceClaim, per class (stable IDs): read from the marker device nodes
   * its claims' CDI devices put in its OCI `linux.devices`, honoured only for a claim prepared here that holds
   * that device. Only CDI injection puts device nodes in a container's spec (kubelet does it for the
   * containers whose resources name the claim's request, of every pod sharing the claim), so a pod cannot
   * mark a container itself, and a sidecar that does not name the claim holds nothing.
   */
  claimed(container: RuntimeContainer): Map<string, string[]> | undefined {
    const nodes = container.spec?.linux?.devices
    if (nodes === undefined) return undefined
    let claimed: Map<string, string[]> | undefined
    for (const node of nodes) {
      const marker = parseClaimMarker(node.path)
      if (marker === undefined) continue
      const device = this.options.record.get(marker.claimUid)?.devices.find((d) => d.device === marker.device)
      if (device === undefined) continue
      claimed ??= new Map()
      const ids = claimed.get(device.className) ?? []
      ids.push(device.stableId)
      claimed.set(device.className, ids)
    }
    return claimed
  }

  async #prepareOne(ref: ClaimRef): Promise<PreparedClaim> {
    const {health, members, metrics, nodeName, readClaim, record} = this.options
    // The UID names the claim's CDI file: nothing but a UID's characters reaches a path.
    if (!claimUidPattern.test(ref.uid)) throw new Error(`claim ${ref.namespace}/${ref.name} has no valid UID (${JSON.stringify(ref.uid.slice(0, 80))})`)
    const before = record.get(ref.uid)
    // Prepared already (kubelet asks again after its restarts): the same answer at once, from the record, with
    // the spec rewritten for the devices present (gone after a reboot); the API server need not answer. Its
    // devices need not be present: the agent gives them back when they return.
    if (before !== undefined) {
      await this.#writeSpec(before)
      return before
    }
    const claim = await readClaim(ref.namespace, ref.name)
    if (claim === undefined) throw new Error(`ResourceClaim ${ref.namespace}/${ref.name} does not exist`)
    const classes = new Map(members.classes.map((c) => [c.metadata.name, c]))
    const unplugged = this.options.unplugged?.()
    const made = prepareClaim({claim, classes, members: (name) => members.of(name), nodeName, uid: ref.uid, unplugged: (name) => unplugged?.get(name)})
    if ('error' in made) throw new Error(made.error)
    // A number a CDI spec puts in a container is the agent's to take back, even after a crash.
    await this.options.beforePrepare?.()
    await record.set(made.prepared)
    await this.#writeSpec(made.prepared, made.devices)
    metrics.preparedClaims.set(record.all().length)
    this.#log.info({claim: `${ref.namespace}/${ref.name}`, devices: made.prepared.devices.map((d) => `${d.device} (${devNodeOf(made.devices, d.device)})`)}, 'claim prepared')
    this.options.onClaimsChanged()
    health.push()
    health.writeStatuses()
    return made.prepared
  }

  /** Writes a claim's spec for its devices present now (`found`: as just found, else the pool's); a claim no longer recorded is left alone. */
  async #writeSpec(claim: PreparedClaim, found?: readonly PresentClaimDevice[]): Promise<void> {
    if (this.options.record.get(claim.uid) === undefined) return
    const pool = this.options.pool()
    const present =
      found
      ?? claim.devices.flatMap((prepared) => {
        const device = pool.get(prepared.device)
        return device === undefined ? [] : [{device, prepared}]
      })
    const presentNames = new Set(present.map((d) => d.prepared.device))
    const awaited = claim.devices.filter((d) => d.toleratesUnplugged === true && !presentNames.has(d.device))
    await this.options.specs.write(claim.uid, present, awaited)
  }

  async #forget(uid: string): Promise<void> {
    await this.options.record.delete(uid)
    await this.options.specs.remove(uid)
  }
}

/** An object UID as the API server makes them (a UUID); anything else is refused before it names a file. */
const claimUidPattern = /^[a-f0-9-]{1,64}$/

const devNodeOf = (devices: readonly PresentClaimDevice[], name: string): string | undefined => devices.find((d) => d.prepared.device === name)?.device.devNode
