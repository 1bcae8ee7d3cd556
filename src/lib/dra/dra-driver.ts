import {watch, type FSWatcher} from 'node:fs'
import {join} from 'node:path'

import type {ClassMembers} from '../devices/class-members.js'
import type {Device, DeviceClass} from '../devices/types.js'
import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import type {KubeClient} from '../kube/kube-client.js'
import type {ClaimRef, NodePrepareResourcesResponse, NodeUnprepareResourcesResponse, NodeWatchResourcesResponse} from '../kubelet/dra-api.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import type {SourceReport, SourceSupervisor} from '../source-supervisor.js'
import {claimCdiSpec, parseClaimMarker, removeClaimCdi, writeClaimCdi} from './claim-cdi.js'
import {prepareClaim, type ResourceClaimObject} from './claim-preparation.js'
import {ClaimStatusWriter} from './claim-status-writer.js'
import {claimDeviceStatuses, claimedOutsideClass, devicesHealth} from './device-health.js'
import {DraDeviceClasses} from './dra-device-classes.js'
import type {DraMetrics} from './dra-metrics.js'
import {DraPluginServer} from './dra-plugin-server.js'
import {PreparedClaims, type PreparedClaim, type PreparedDevice} from './prepared-claims.js'
import {draDriver, nodeDevicesOf, type NodeDevices} from './resource-slices.js'
import {SlicePublisher} from './slice-publisher.js'

export interface DraDriverOptions {
  readonly nodeName: string
  readonly client: KubeClient
  /** The node's classes and their devices, kept in step by the agent. */
  readonly members: ClassMembers
  /** The cluster's valid classes, every node's (their resource.k8s.io DeviceClasses are kept from here). */
  readonly clusterClasses: () => readonly DeviceClass[]
  /** Whether clusterClasses() is the cluster's list as listed (not the copy persisted for a start without it). */
  readonly clusterListed: () => boolean
  /** kubelet's root directory: plugins_registry/ and plugins/ are below it. */
  readonly kubeletDir: string
  /** Where claim CDI specs go: a directory the runtime reads (containerd's cdi_spec_dirs). */
  readonly cdiDir: string
  /** Where prepared claims are recorded. */
  readonly stateDir: string
  readonly logger: Logger
  readonly metrics: DraMetrics
  /** The devices a container may hold changed (a claim prepared or unprepared): the agent runs a batch. */
  readonly onClaimsChanged: () => void
  /** Awaited before a claim's CDI spec is written: its device numbers are recorded as the agent's (OwnedDevices.saved). */
  readonly beforePrepare?: () => Promise<void>
  /** Serves the plugin sockets again with back-off when they cannot be (given up on: the agent exits 1), and retries the DeviceClasses. */
  readonly supervisor: SourceSupervisor
}

/**
 * The DRA driver devices.nfdctl.io on this node: publishes the devices of the node's DRA classes as its
 * pool of ResourceSlices, keeps a resource.k8s.io DeviceClass per DRA class, and serves kubelet's DRA
 * plugin: a prepared claim is a CDI spec per claim (its device nodes, by kernel name) and a record under
 * --state-dir. Device health follows the devices: an unplugged device of a claim is Unhealthy on kubelet's
 * stream and not Ready in the claim's status until the same device (stable ID) is back; the agent gives it
 * back to the claim's containers (claimed()).
 */
export class DraDriver {
  readonly #log: Logger
  readonly #slices: SlicePublisher
  readonly #deviceClasses: DraDeviceClasses
  readonly #server: DraPluginServer
  readonly #claims: PreparedClaims
  readonly #status: ClaimStatusWriter
  readonly #sockets: SourceReport
  #devices: NodeDevices = {byName: new Map(), devices: [], dropped: new Map()}
  /** Devices of prepared claims that are on the node but out of their class (a class edit), not unplugged. */
  #outsideClass: ReadonlySet<string> = new Set()
  #registered: boolean | undefined
  readonly #watchers: FSWatcher[] = []
  /** After a failed claim status write, every claim's status again: 5 s each time, one retry scheduled at a time. */
  readonly #statusRetry = new RetryTimer({backoff: {baseMs: 5000, maxMs: 5000}})
  /** The CDI spec last written per claim. */
  readonly #specs = new Map<string, string>()
  /** Prepare and unprepare of one claim, one after the other. */
  readonly #claimLocks = new Map<string, Promise<unknown>>()
  #checking: Promise<void> = Promise.resolve()
  #stopped = false
  /** Classes whose devices changed since the last flush. */
  readonly #changed = new Set<string>()
  /** Devices whose classes did not all fit in the slice, said once. */
  readonly #toldDropped = new Set<string>()

  constructor(readonly options: DraDriverOptions) {
    const {client, logger, metrics, nodeName} = options
    this.#log = logger.child({driver: draDriver})
    this.#slices = new SlicePublisher({
      client,
      logger: this.#log,
      nodeName,
      onError: () => metrics.errors.inc({kind: 'slices'}),
      onPublished: (devices) => metrics.publishedDevices.set(devices.length),
    })
    this.#deviceClasses = new DraDeviceClasses({
      client,
      complete: options.clusterListed,
      logger: this.#log,
      onError: () => metrics.errors.inc({kind: 'deviceclasses'}),
      supervisor: options.supervisor,
    })
    this.#claims = new PreparedClaims(options.stateDir)
    this.#status = new ClaimStatusWriter(
      client,
      nodeName,
      this.#log,
      () => metrics.errors.inc({kind: 'claim-status'}),
      () => {
        if (!this.#statusRetry.pending) this.#statusRetry.failed(() => this.#writeStatuses())
      },
    )
    this.#server = new DraPluginServer({
      handlers: {
        health: () => this.#health(),
        prepare: (claims) => this.#prepare(claims),
        registered: (ok, error) => this.#registeredChanged(ok, error),
        unprepare: (claims) => this.#unprepare(claims),
      },
      logger: this.#log,
      pluginDir: join(options.kubeletDir, 'plugins', draDriver),
      registrationDir: join(options.kubeletDir, 'plugins_registry'),
    })
    // In the same queue as the directory checks: two serve() at once would close each other's sockets.
    this.#sockets = options.supervisor.restartable('DRA plugin sockets', () => {
      const serving = this.#checking.then(() => this.#serve())
      this.#checking = serving.catch(() => {})
      return serving
    })
  }

  /** Loads the prepared claims, publishes the pool, then serves kubelet (which may call at once). */
  async start(signal: AbortSignal): Promise<void> {
    try {
      await this.#claims.load()
    } catch (error) {
      this.options.metrics.errors.inc({kind: 'state'})
      this.#log.warn({err: errorMessage(error), file: this.#claims.file}, 'the record of prepared claims cannot be used; kubelet prepares its claims again as pods start')
    }
    this.options.metrics.preparedClaims.set(this.#claims.all().length)
    this.#recompute()
    // A spec under /var/run/cdi does not outlive a reboot; the record does.
    await this.#refreshSpecs()
    this.#deviceClasses.start(signal)
    // In the background: the API server may be away, and kubelet must still get its recorded claims meanwhile.
    void this.#slices.start(signal).synced.then(() => this.#forgetGoneClaims())
    this.classesChanged()
    await this.#server.serve()
    this.#sockets.up()
    // kubelet does not remove our sockets, but an operator or a wiped directory may.
    for (const dir of [join(this.options.kubeletDir, 'plugins_registry'), join(this.options.kubeletDir, 'plugins', draDriver)]) {
      const watcher = watch(dir, () => void this.#check())
      watcher.on('error', (error) => this.#log.warn({dir, err: errorMessage(error)}, 'cannot watch a plugin directory'))
      this.#watchers.push(watcher)
    }
    this.#writeStatuses()
  }

  async stop(): Promise<void> {
    this.#stopped = true
    this.#statusRetry.stop()
    for (const watcher of this.#watchers) watcher.close()
    await this.#checking
    await this.#server.close()
    await this.#slices.stop()
    await this.#deviceClasses.stop()
  }

  /** Ready once kubelet has registered the driver. */
  status(): {ready: boolean; reason: string} {
    if (this.#registered === true) return {ready: true, reason: `DRA driver ${draDriver} registered`}
    return {ready: false, reason: `DRA driver ${draDriver}: ${this.#registered === false ? 'kubelet refused the registration' : 'waiting for kubelet to register it'}`}
  }

  /** Classes changed: the pool, the resource.k8s.io DeviceClasses and the health follow. */
  classesChanged(): void {
    void this.#deviceClasses.sync(this.options.clusterClasses())
    this.publish(new Set(this.options.members.classNames), true)
  }

  /** Devices of these classes came or went: published by the next flush(). */
  devicesChanged(classes: ReadonlySet<string>): void {
    for (const name of classes) this.#changed.add(name)
  }

  /** Publishes what devicesChanged() collected. */
  flush(): void {
    if (this.#changed.size === 0) return
    const changed = new Set(this.#changed)
    this.#changed.clear()
    this.publish(changed)
  }

  /** Devices of these classes came or went: the pool, health and claim statuses follow (only when a DRA class is among them). */
  publish(classes: ReadonlySet<string>, everything = false): void {
    if (!everything && !this.options.members.classes.some((c) => c.spec.allocation === 'DRA' && classes.has(c.metadata.name))) return
    this.#recompute()
    this.#server.pushHealth()
    this.#writeStatuses()
    void this.#refreshSpecs()
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
      const device = this.#claims.get(marker.claimUid)?.devices.find((d) => d.device === marker.device)
      if (device === undefined) continue
      claimed ??= new Map()
      const ids = claimed.get(device.className) ?? []
      ids.push(device.stableId)
      claimed.set(device.className, ids)
    }
    return claimed
  }

  /**
   * Drops the recorded claims that no longer exist as prepared here (deleted, re-created under another UID):
   * kubelet unprepares a claim only while it knows of it, and one prepared before kubelet lost its checkpoint
   * would keep its spec, record and "unplugged" reports forever. A claim the API server still has is kept.
   */
  async #forgetGoneClaims(): Promise<void> {
    for (const claim of this.#claims.all()) {
      const path = `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(claim.namespace)}/resourceclaims/${encodeURIComponent(claim.name)}`
      const gone = await this.options.client.request<ResourceClaimObject>('GET', path).then(
        (found) => found.metadata.uid !== claim.uid,
        (error: unknown) => isStatus(error, 'NotFound'),
      )
      if (!gone || this.#stopped) continue
      await this.#lockClaim(claim.uid, async () => {
        await this.#claims.delete(claim.uid)
        await removeClaimCdi(this.options.cdiDir, claim.uid)
        this.#specs.delete(claim.uid)
      }).catch(() => {})
      this.#log.info({claim: `${claim.namespace}/${claim.name}`}, 'recorded claim no longer exists; its CDI spec and record are removed')
    }
    this.options.metrics.preparedClaims.set(this.#claims.all().length)
  }

  /** Rewrites each prepared claim's CDI spec whose present devices changed (a re-plug gives new numbers). */
  async #refreshSpecs(): Promise<void> {
    for (const claim of this.#claims.all()) {
      await this.#lockClaim(claim.uid, () => this.#writeSpec(claim)).catch((error: unknown) => {
        this.options.metrics.errors.inc({kind: 'cdi'})
        this.#log.warn({claim: `${claim.namespace}/${claim.name}`, err: errorMessage(error)}, "cannot rewrite the claim's CDI spec")
      })
    }
  }

  /** Writes a claim's spec for its devices present now (`present`: as just found, else the pool's). */
  async #writeSpec(claim: PreparedClaim, found?: ReadonlyArray<{readonly prepared: PreparedDevice; readonly device: Device}>): Promise<void> {
    if (this.#claims.get(claim.uid) === undefined) return
    const present =
      found
      ?? claim.devices.flatMap((prepared) => {
        const device = this.#devices.byName.get(prepared.device)
        return device === undefined ? [] : [{device, prepared}]
      })
    const spec = claimCdiSpec(claim.uid, present)
    const key = JSON.stringify(spec)
    if (this.#specs.get(claim.uid) === key) return
    await writeClaimCdi(this.options.cdiDir, claim.uid, spec)
    this.#specs.set(claim.uid, key)
  }

  /** Runs `work` after whatever runs for the same claim: kubelet's calls and the spec rewrites never interleave. */
  #lockClaim<T>(uid: string, work: () => Promise<T>): Promise<T> {
    const before = this.#claimLocks.get(uid) ?? Promise.resolve()
    const run = before.catch(() => {}).then(work)
    const settled = run.catch(() => {})
    this.#claimLocks.set(uid, settled)
    void settled.then(() => {
      if (this.#claimLocks.get(uid) === settled) this.#claimLocks.delete(uid)
    })
    return run
  }

  #recompute(): void {
    const {members} = this.options
    this.#devices = nodeDevicesOf(members.classes, (name) => members.of(name))
    this.#outsideClass = claimedOutsideClass(this.#claims.all(), this.#devices.byName, members.present())
    for (const [device, classes] of this.#devices.dropped) {
      if (this.#toldDropped.has(device)) continue
      this.#toldDropped.add(device)
      this.#log.warn({classes, device}, 'device is in more classes than a ResourceSlice device can name; claims of these classes cannot get it')
    }
    this.#slices.setDevices(this.#devices.devices)
  }

  #health(): NodeWatchResourcesResponse {
    const now = Math.floor(Date.now() / 1000)
    return {
      devices: devicesHealth(this.#devices.byName, this.#claims.all(), this.#outsideClass).map((h) => ({
        device: {device_name: h.device, pool_name: this.options.nodeName},
        health: h.healthy ? 'HEALTHY' : 'UNHEALTHY',
        health_check_timeout_seconds: 0,
        last_updated_time: now,
        message: h.message,
      })),
    }
  }

  #writeStatuses(): void {
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
    for (const claim of this.#claims.all()) {
      void this.#status.write(claim, claimDeviceStatuses(claim, this.options.nodeName, this.#devices.byName, now, this.#status.conditions(claim.uid), this.#outsideClass))
    }
  }

  async #prepare(claims: readonly ClaimRef[]): Promise<NodePrepareResourcesResponse> {
    const response: NodePrepareResourcesResponse = {claims: {}}
    const started = performance.now()
    for (const ref of claims) {
      try {
        const prepared = await this.#lockClaim(ref.uid, () => this.#prepareOne(ref))
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

  async #prepareOne(ref: ClaimRef): Promise<PreparedClaim> {
    const {client, members, nodeName} = this.options
    // The UID names the claim's CDI file: nothing but a UID's characters reaches a path.
    if (!claimUidPattern.test(ref.uid)) throw new Error(`claim ${ref.namespace}/${ref.name} has no valid UID (${JSON.stringify(ref.uid.slice(0, 80))})`)
    const before = this.#claims.get(ref.uid)
    // Prepared already (kubelet asks again after its restarts): the same answer at once, from the record, with
    // the spec rewritten for the devices present (gone after a reboot); the API server need not answer. Its
    // devices need not be present: the agent gives them back when they return.
    if (before !== undefined) {
      await this.#writeSpec(before)
      return before
    }
    const claim = await client
      .request<ResourceClaimObject>('GET', `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(ref.namespace)}/resourceclaims/${encodeURIComponent(ref.name)}`)
      .catch((error: unknown) => {
        if (isStatus(error, 'NotFound')) throw new Error(`ResourceClaim ${ref.namespace}/${ref.name} does not exist`)
        throw error
      })
    const classes = new Map(members.classes.map((c) => [c.metadata.name, c]))
    const made = prepareClaim({claim, classes, members: (name) => members.of(name), nodeName, uid: ref.uid})
    if ('error' in made) throw new Error(made.error)
    // A number a CDI spec puts in a container is the agent's to take back, even after a crash.
    await this.options.beforePrepare?.()
    await this.#claims.set(made.prepared)
    await this.#writeSpec(made.prepared, made.devices)
    this.options.metrics.preparedClaims.set(this.#claims.all().length)
    this.#log.info({claim: `${ref.namespace}/${ref.name}`, devices: made.prepared.devices.map((d) => `${d.device} (${devNodeOf(made.devices, d.device)})`)}, 'claim prepared')
    this.options.onClaimsChanged()
    this.#server.pushHealth()
    this.#writeStatuses()
    return made.prepared
  }

  async #unprepare(claims: readonly ClaimRef[]): Promise<NodeUnprepareResourcesResponse> {
    const response: NodeUnprepareResourcesResponse = {claims: {}}
    for (const ref of claims) {
      try {
        const prepared = this.#claims.get(ref.uid)
        // Never prepared with such a UID, so nothing to remove.
        if (!claimUidPattern.test(ref.uid)) {
          response.claims[ref.uid] = {error: ''}
          continue
        }
        await this.#lockClaim(ref.uid, async () => {
          await this.#claims.delete(ref.uid)
          await removeClaimCdi(this.options.cdiDir, ref.uid)
          this.#specs.delete(ref.uid)
        })
        if (prepared !== undefined) {
          void this.#status.write(prepared, [])
          this.#log.info({claim: `${ref.namespace}/${ref.name}`}, 'claim unprepared')
        }
        response.claims[ref.uid] = {error: ''}
      } catch (error) {
        this.options.metrics.errors.inc({kind: 'unprepare'})
        response.claims[ref.uid] = {error: errorMessage(error)}
      }
    }
    this.options.metrics.preparedClaims.set(this.#claims.all().length)
    this.options.onClaimsChanged()
    this.#server.pushHealth()
    return response
  }

  #registeredChanged(ok: boolean, error: string): void {
    const was = this.#registered
    this.#registered = ok
    this.options.metrics.registered.set(ok ? 1 : 0)
    if (ok) {
      if (was !== true) this.#log.info({}, `DRA driver ${draDriver}: registered with kubelet`)
      // A kubelet that (re)starts deletes the node's slices: publish them again.
      this.#slices.republish()
    } else this.#log.warn({err: error}, `DRA driver ${draDriver}: kubelet refused the registration`)
  }

  /** Serves again when our sockets are gone; one that cannot be served is the supervisor's to retry. */
  #check(): Promise<void> {
    this.#checking = this.#checking.then(async () => {
      if (this.#stopped || (await this.#server.isServing())) return
      this.#log.info({socket: this.#server.registrationSocket}, 'our plugin sockets are gone; serving again')
      await this.#serve().then(
        () => this.#sockets.up(),
        (error: unknown) => this.#sockets.failed(error),
      )
    })
    return this.#checking
  }

  async #serve(): Promise<void> {
    if (this.#stopped) return
    this.#registered = undefined
    try {
      await this.#server.serve()
    } catch (error) {
      this.options.metrics.errors.inc({kind: 'serve'})
      throw new Error(`cannot serve the DRA plugin: ${errorMessage(error)}`, {cause: error})
    }
  }
}

/** An object UID as the API server makes them (a UUID); anything else is refused before it names a file. */
const claimUidPattern = /^[a-f0-9-]{1,64}$/

const devNodeOf = (devices: ReadonlyArray<{prepared: {device: string}; device: Device}>, name: string): string | undefined => devices.find((d) => d.prepared.device === name)?.device.devNode
