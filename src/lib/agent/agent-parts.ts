import type {DroppedFeatures} from '../devices/dropped-features.js'
import type {RuntimeContainer} from '../runtime/containerd-client.js'

/** What a part says for /readyz. */
export interface Readiness {
  readonly ready: boolean
  readonly reason: string
}

/**
 * What the agent needs of the classes' kubelet device plugins (the command passes a PluginSet): they serve
 * the same class members the agent keeps in step, and it tells them when those change.
 */
export interface DevicePlugins {
  start(): Promise<void>
  stop(): Promise<void>
  status(): Readiness
  /** The node's classes changed (their members are placed already). */
  classesChanged(): void
  /** Devices of these classes came or went. */
  publish(classes: ReadonlySet<string>): void
}

/**
 * What the agent needs of the DRA driver (the command passes a DraDriver): it follows the same class members,
 * publishes after each batch, and says which devices a container holds by ResourceClaim. Its prepared and
 * unprepared claims reach the agent as events on the signal the command gives both.
 */
export interface ClaimDriver {
  start(signal: AbortSignal): Promise<void>
  stop(): Promise<void>
  status(): Readiness
  classesChanged(): void
  /** Devices of these classes came or went: published by the next flush(). */
  devicesChanged(classes: ReadonlySet<string>): void
  /** Publishes what changed (pool, health, claim statuses); called once a batch has given containers their devices. */
  flush(): void
  /** The devices a container holds by ResourceClaim, per DRA class (stable IDs); undefined when it holds no claim. */
  claimed(container: RuntimeContainer): ReadonlyMap<string, readonly string[]> | undefined
  /** What the API server drops of what the driver writes: said in the DRA classes' status. */
  dropped(): DroppedFeatures
  /** Why the node's runtime would not hand claims' devices to containers, as last read; undefined when it would. */
  runtimeProblem(): string | undefined
}

/** A part the agent only stops. */
export interface Stoppable {
  stop(): void | Promise<void>
}
