import {join} from 'node:path'

import type {ClassMembers} from '../devices/class-members.js'
import type {DroppedFeatures} from '../devices/dropped-features.js'
import type {DeviceClass} from '../devices/types.js'
import type {KubeClient} from '../kube/kube-client.js'
import {SocketKeeper} from '../kubelet/socket-keeper.js'
import type {Logger} from '../observe/logger.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'
import type {SourceSupervisor} from '../source-supervisor.js'
import {ClaimHealth} from './claim-health.js'
import {ClaimLifecycle} from './claim-lifecycle.js'
import {claimReader} from './claim-reader.js'
import {ClaimSpecs} from './claim-specs.js'
import {ClaimStatusWriter} from './claim-status-writer.js'
import {DevicePool} from './device-pool.js'
import {DraDeviceClasses} from './dra-device-classes.js'
import type {DraMetrics} from './dra-metrics.js'
import {DraPluginServer} from './dra-plugin-server.js'
import {DraRegistration} from './dra-registration.js'
import {PreparedClaims} from './prepared-claims.js'
import {draDriver} from './resource-slices.js'
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
  /** What the API server drops (dropped()) or the runtime's problem (runtimeProblem()) changed: the agent reports the classes' status again. */
  readonly onDroppedChanged?: () => void
  /**
   * Why the node's runtime would not hand claims' devices to containers (runtimeCdiProblem over its CRI
   * configuration); read at start and before each prepare, whose claims are refused with it.
   */
  readonly runtimeCdi?: () => Promise<string | undefined>
}

/**
 * The DRA driver devices.nfdctl.io on this node, composed of its parts: the pool (the devices of the node's
 * DRA classes as its ResourceSlices, a resource.k8s.io DeviceClass per DRA class), the claims' lifecycle
 * (a prepared claim is a CDI spec per claim, its device nodes by kernel name, and a record under
 * --state-dir), their health (an unplugged device of a claim is Unhealthy on kubelet's stream and not Ready
 * in the claim's status until the same device, by stable ID, is back; the agent gives it back to the
 * claim's containers through claimed()), and kubelet's plugin sockets, kept by a SocketKeeper.
 */
export class DraDriver {
  #runtimeProblem: string | undefined
  readonly #slices: SlicePublisher
  readonly #deviceClasses: DraDeviceClasses
  readonly #pool: DevicePool
  readonly #claims: ClaimLifecycle
  readonly #health: ClaimHealth
  readonly #registration: DraRegistration
  readonly #keeper: SocketKeeper

  constructor(readonly options: DraDriverOptions) {
    const {client, members, metrics, nodeName, supervisor} = options
    const log = options.logger.child({driver: draDriver})
    this.#slices = new SlicePublisher({
      client,
      logger: log,
      nodeName,
      onError: () => metrics.errors.inc({kind: 'slices'}),
      onPublished: (devices) => metrics.publishedDevices.set(devices.length),
      onTaintsDropped: () => options.onDroppedChanged?.(),
    })
    this.#deviceClasses = new DraDeviceClasses({
      client,
      complete: options.clusterListed,
      logger: log,
      onDroppedChanged: () => options.onDroppedChanged?.(),
      onError: () => metrics.errors.inc({kind: 'deviceclasses'}),
      supervisor,
    })
    const record = new PreparedClaims(options.stateDir)
    const pool = new DevicePool({
      clusterClasses: options.clusterClasses,
      deviceClasses: this.#deviceClasses,
      logger: log,
      members,
      onPublished: () => this.#poolPublished(),
      slices: this.#slices,
    })
    this.#pool = pool
    const statuses = new ClaimStatusWriter(
      client,
      nodeName,
      log,
      () => metrics.errors.inc({kind: 'claim-status'}),
      () => this.#health.statusFailed(),
    )
    const pluginDir = join(options.kubeletDir, 'plugins', draDriver)
    const registrationDir = join(options.kubeletDir, 'plugins_registry')
    const server = new DraPluginServer({
      handlers: {
        health: () => this.#health.health(),
        prepare: (claims) => this.#claims.prepare(claims),
        registered: (ok, error) => this.#registration.registered(ok, error),
        unprepare: (claims) => this.#claims.unprepare(claims),
      },
      logger: log,
      pluginDir,
      registrationDir,
    })
    this.#health = new ClaimHealth({
      claims: () => record.all(),
      nodeName,
      onNode: () => members.present(),
      pool: () => pool.devices.byName,
      push: () => server.pushHealth(),
      statuses,
    })
    this.#claims = new ClaimLifecycle({
      beforePrepare: options.beforePrepare,
      refusal: () => this.#readRuntime(),
      health: this.#health,
      logger: log,
      members,
      metrics,
      nodeName,
      onClaimsChanged: () => options.onClaimsChanged(),
      pool: () => pool.devices.byName,
      readClaim: claimReader(client),
      unplugged: () => pool.unplugged,
      record,
      specs: new ClaimSpecs(options.cdiDir),
    })
    // kubelet re-registers the driver when it (re)starts, and deletes the node's slices then: publish them again.
    this.#registration = new DraRegistration({logger: log, metrics, onRegistered: () => this.#slices.republish()})
    this.#keeper = new SocketKeeper({
      logger: log,
      onGone: () => log.info({socket: server.registrationSocket}, 'our plugin sockets are gone; serving again'),
      restarts: {name: 'DRA plugin sockets', supervisor},
      socket: this.#registration.keptSocket(server),
      // kubelet does not remove our sockets, but an operator or a wiped directory may.
      watch: [registrationDir, pluginDir],
    })
  }

  /** Loads the prepared claims, publishes the pool, then serves kubelet (which may call at once). */
  async start(signal: AbortSignal): Promise<void> {
    await this.#readRuntime().catch(() => undefined)
    await this.#claims.load()
    this.#pool.compute()
    this.#health.recompute()
    // A spec under /var/run/cdi does not outlive a reboot; the record does.
    await this.#claims.refreshSpecs()
    this.#deviceClasses.start(signal)
    // In the background: the API server may be away, and kubelet must still get its recorded claims meanwhile.
    void this.#slices.start(signal).synced.then(() => this.#claims.forgetGone())
    this.classesChanged()
    await this.#keeper.keepNow()
    await this.#keeper.start()
    this.#health.writeStatuses()
  }

  async stop(): Promise<void> {
    this.#claims.stop()
    this.#pool.stop()
    this.#health.stop()
    await this.#keeper.close()
    await this.#slices.stop()
    await this.#deviceClasses.stop()
  }

  /** Ready once kubelet has registered the driver. */
  status(): {ready: boolean; reason: string} {
    return this.#registration.status()
  }

  /** Classes changed: the pool, the resource.k8s.io DeviceClasses and the health follow. */
  classesChanged(): void {
    this.#pool.classesChanged()
  }

  /** Devices of these classes came or went: published by the next flush(). */
  devicesChanged(classes: ReadonlySet<string>): void {
    this.#pool.devicesChanged(classes)
  }

  /** Publishes what devicesChanged() collected. */
  flush(): void {
    this.#pool.flush()
  }

  /** Devices of these classes came or went: the pool, health and claim statuses follow (only when a DRA class is among them). */
  publish(classes: ReadonlySet<string>, everything = false): void {
    this.#pool.publish(classes, everything)
  }

  /** Why the node's runtime would not hand claims' devices to containers, as last read. */
  runtimeProblem(): string | undefined {
    return this.#runtimeProblem
  }

  /** Reads the runtime's problem again; a change is reported (onDroppedChanged). A read that fails keeps the last. */
  async #readRuntime(): Promise<string | undefined> {
    if (this.options.runtimeCdi === undefined) return undefined
    const problem = await this.options.runtimeCdi()
    if (problem !== this.#runtimeProblem) {
      this.#runtimeProblem = problem
      this.options.onDroppedChanged?.()
    }
    return problem
  }

  /** What the API server was seen to drop of the DeviceClasses and slices this driver wrote. */
  dropped(): DroppedFeatures {
    return {extendedResourceName: this.#deviceClasses.extendedResourceNameDropped, taints: this.#slices.taintsDropped}
  }

  /** The devices a container holds by ResourceClaim, per class (stable IDs): see ClaimLifecycle.claimed. */
  claimed(container: RuntimeContainer): Map<string, string[]> | undefined {
    return this.#claims.claimed(container)
  }

  #poolPublished(): void {
    this.#health.recompute()
    this.#health.push()
    this.#health.writeStatuses()
    void this.#claims.refreshSpecs()
  }
}
