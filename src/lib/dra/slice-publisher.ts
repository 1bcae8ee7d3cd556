import {errorMessage} from '../errors.js'
import {isStatus} from '../kube/api-error.js'
import {Informer} from '../kube/informer.js'
import type {KubeClient} from '../kube/kube-client.js'
import {toMeta, type ObjectCodec} from '../kube/metadata-list.js'
import type {ObjectMeta} from '../kube/resource.js'
import type {Logger} from '../observe/logger.js'
import {RetryTimer} from '../retry-timer.js'
import {draDriver, nodeSlicesOf, sameDevices, type ResourceSlice, type SliceDevice} from './resource-slices.js'

const slicesResource = {group: 'resource.k8s.io', namespaced: false, plural: 'resourceslices', version: 'v1'}
const slicesPath = '/apis/resource.k8s.io/v1/resourceslices'

type ListedSlice = ResourceSlice & {readonly metadata: ObjectMeta}

const sliceCodec: ObjectCodec<ListedSlice> = {
  listAccept: 'application/json',
  metaOf: (slice) => slice.metadata,
  toItem: (raw) => {
    const slice = raw as {metadata?: ObjectMeta; spec?: ResourceSlice['spec']}
    if (slice.metadata === undefined || slice.spec === undefined) return undefined
    return {apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice', metadata: toMeta(slice.metadata), spec: slice.spec}
  },
  watchAccept: 'application/json',
}

/** How many taints a slice's devices carry. */
const taintsOf = (slice: Partial<ResourceSlice> | undefined): number => (slice?.spec?.devices ?? []).reduce((n, d) => n + (d.taints?.length ?? 0), 0)

export interface SlicePublisherOptions {
  readonly client: KubeClient
  readonly nodeName: string
  readonly logger: Logger
  /** A write that failed (retried after a back-off). */
  readonly onError: () => void
  /** The slices were written (the devices they list are what the scheduler sees). */
  readonly onPublished?: (devices: readonly SliceDevice[]) => void
  /** The API server was found to drop the devices' taints (once per process: the gate is the API server's). */
  readonly onTaintsDropped?: () => void
  /** Delay before a failed write is tried again, doubling up to 30 s; default 1 s. */
  readonly retryMs?: number
}

/**
 * Keeps this node's pool of ResourceSlices equal to its devices. Its own slices are watched: one that
 * someone else changes or deletes (kubelet deletes a node's slices when it starts, and after the driver
 * deregisters) is written again. Writes are server-side applies of whole slices with a new pool
 * generation; slices past the count are deleted. One write round at a time; changes meanwhile make one more.
 */
export class SlicePublisher {
  readonly #informer: Informer<ListedSlice>
  #devices: readonly SliceDevice[] = []
  #generation = 0
  /** What the last successful round wrote, by slice name. */
  #written = new Map<string, ResourceSlice>()
  #round: Promise<void> | undefined
  #again = false
  /** Slices deleted or changed by others while a write round runs: not taken as written when it ends. */
  readonly #invalidated = new Set<string>()
  /** The slices the running write round writes. */
  #writing = new Map<string, ResourceSlice>()
  #started = false
  #stopped = false
  /** Between failed write rounds: every node's agent retries when the API server is at its busiest. */
  readonly #retry: RetryTimer
  /** The API server dropped the devices' taints (DRADeviceTaints off): tainted devices are not written. */
  #taintsDropped = false

  constructor(readonly options: SlicePublisherOptions) {
    this.#retry = new RetryTimer({backoff: {baseMs: options.retryMs ?? 1000, maxMs: 30_000}})
    this.#informer = new Informer<ListedSlice>(
      {
        client: options.client,
        fieldSelector: `spec.nodeName=${options.nodeName},spec.driver=${draDriver}`,
        logger: options.logger,
        onChanged: (slice) => {
          // A relist, a slice of ours this process did not write, or one changed by someone else: compare again.
          if (slice !== undefined) {
            // Our own write (of this round or the last) coming back is not a change.
            const written = this.#writing.get(slice.metadata.name) ?? this.#written.get(slice.metadata.name)
            if (written !== undefined && sameDevices(slice, written)) return
            this.#invalidate(slice.metadata.name)
          } else {
            for (const [name, written] of this.#written) {
              const listed = this.#informer.cache.get(name)
              if (listed === undefined || !sameDevices(listed, written)) this.#invalidate(name)
            }
          }
          this.#schedule()
        },
        onDeleted: (slice) => {
          this.#invalidate(slice.metadata.name)
          this.#schedule()
        },
        pageSize: 500,
        resource: slicesResource,
      },
      sliceCodec,
    )
  }

  /**
   * Lists the node's slices (their generation is where the pool's continues), then publishes; in the
   * background, so that the API server being away holds nothing else up. `synced` resolves after the first list.
   */
  start(signal: AbortSignal): {synced: Promise<void>} {
    const synced = this.#informer.start(signal).then(() => {
      this.#started = true
      this.#schedule()
    })
    synced.catch(() => {}) // rejects only when stopped before the first list
    return {synced}
  }

  /** Whether the API server dropped the taints of a device this publisher wrote. */
  get taintsDropped(): boolean {
    return this.#taintsDropped
  }

  /** The devices to publish; written at once when they differ from the pool's. */
  setDevices(devices: readonly SliceDevice[]): void {
    this.#devices = devices
    this.#schedule()
  }

  /** A slice that must be written again, also when a write round that has it is running now. */
  #invalidate(name: string): void {
    this.#written.delete(name)
    this.#invalidated.add(name)
  }

  /** Writes again whatever kubelet may have deleted (it wipes a node's slices when it starts). */
  republish(): void {
    this.#written.clear()
    this.#schedule()
  }

  /** Resolves when no write round is running or due. */
  async settled(): Promise<void> {
    while (this.#round !== undefined) await this.#round
  }

  async stop(): Promise<void> {
    this.#stopped = true
    this.#retry.stop()
    await this.settled()
    await this.#informer.stop()
  }

  #schedule(): void {
    if (!this.#started || this.#stopped) return
    if (this.#round !== undefined) {
      this.#again = true
      return
    }
    this.#round = this.#publish()
      .then(
        () => this.#retry.succeeded(),
        (error: unknown) => {
          this.#writing = new Map()
          this.options.onError()
          this.options.logger.warn({err: errorMessage(error)}, 'cannot write the ResourceSlices of this node; trying again')
          this.#retry.failed(() => this.republish())
        },
      )
      .finally(() => {
        this.#round = undefined
        if (this.#again) {
          this.#again = false
          this.#schedule()
        }
      })
  }

  async #publish(): Promise<void> {
    const {client, logger, nodeName} = this.options
    // Listed without its taint an unplugged device would be allocatable: left out, as a driver without taints does.
    const devices = this.#taintsDropped ? this.#devices.filter((d) => (d.taints?.length ?? 0) === 0) : this.#devices
    this.#invalidated.clear()
    const listed = [...this.#informer.cache.values()].filter((s) => s.spec.driver === draDriver && s.spec.nodeName === nodeName)
    const wanted = new Map(nodeSlicesOf(nodeName, devices, this.#generation).map((s) => [s.metadata.name, s]))
    const stale = [...new Set([...listed.map((s) => s.metadata.name), ...this.#written.keys()])].filter((name) => !wanted.has(name))
    const unchanged = [...wanted.values()].every((w) => {
      const written = this.#written.get(w.metadata.name)
      return written !== undefined && sameDevices(written, w)
    })
    if (unchanged && stale.length === 0) return
    this.#generation = Math.max(this.#generation, ...listed.map((s) => s.spec.pool.generation ?? 0)) + 1
    const slices = nodeSlicesOf(nodeName, devices, this.#generation)
    this.#writing = new Map(slices.map((s) => [s.metadata.name, s]))
    const written = new Map<string, ResourceSlice>()
    for (const slice of slices) {
      const stored = await client.request<Partial<ResourceSlice> | undefined>('PATCH', `${slicesPath}/${encodeURIComponent(slice.metadata.name)}`, {
        body: slice,
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: 'nfdctl-agent', force: true},
      })
      written.set(slice.metadata.name, slice)
      if (!this.#taintsDropped && taintsOf(slice) > 0 && taintsOf(stored) === 0) {
        this.#taintsDropped = true
        this.#again = true
        logger.warn(
          {slice: slice.metadata.name},
          'the API server drops ResourceSlice device taints (the DRADeviceTaints feature gate is off): unplugged devices are left out of the slices instead of listed with a taint',
        )
        this.options.onTaintsDropped?.()
      }
    }
    for (const name of stale) {
      await client.request('DELETE', `${slicesPath}/${encodeURIComponent(name)}`).catch((error: unknown) => {
        if (!isStatus(error, 'NotFound')) throw error
      })
    }
    for (const name of this.#invalidated) written.delete(name)
    this.#written = written
    this.#writing = new Map()
    logger.debug({devices: devices.length, generation: this.#generation, slices: slices.length}, 'ResourceSlices written')
    this.options.onPublished?.(devices)
  }
}
