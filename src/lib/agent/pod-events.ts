import {randomBytes} from 'node:crypto'

import {errorMessage} from '../errors.js'
import type {KubeClient} from '../kube/kube-client.js'
import {noopLogger, type Logger} from '../observe/logger.js'

export interface PodRef {
  readonly namespace: string
  readonly name: string
  readonly uid: string
}

/** The object an Event is about; a cluster-scoped one has no namespace (its Events go to `default`). */
export interface ObjectRef {
  readonly apiVersion: string
  readonly kind: string
  readonly name: string
  readonly namespace?: string
  readonly uid?: string
}

export interface PodEventsOptions {
  readonly client: KubeClient
  readonly nodeName: string
  readonly logger?: Logger
  /** Told of each Event that could not be written. */
  readonly onError?: () => void
}

/** Event messages are cut here, as kubelet's recorder does (the API server refuses longer ones). */
const maxMessageLength = 1024

/**
 * Writes core/v1 Events about pods and DeviceClasses (what `kubectl describe` shows), from component
 * nfdctl-agent on this node. Best effort, as kubelet's recorder: an Event that cannot be written is logged (once per outage) and
 * dropped; nobody waits for it but stop().
 */
export class PodEvents {
  readonly #log: Logger
  readonly #pending = new Set<Promise<void>>()
  #failing = false

  constructor(readonly options: PodEventsOptions) {
    this.#log = options.logger ?? noopLogger
  }

  warn(pod: PodRef, reason: string, message: string): void {
    this.warnAbout({apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: pod.namespace, uid: pod.uid}, reason, message)
  }

  warnAbout(object: ObjectRef, reason: string, message: string): void {
    const now = new Date().toISOString()
    const namespace = object.namespace ?? 'default'
    const event = {
      apiVersion: 'v1',
      count: 1,
      firstTimestamp: now,
      involvedObject: object,
      kind: 'Event',
      lastTimestamp: now,
      message: message.length > maxMessageLength ? `${message.slice(0, maxMessageLength - 3)}...` : message,
      metadata: {name: `${object.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`, namespace},
      reason,
      reportingComponent: 'nfdctl-agent',
      reportingInstance: this.options.nodeName,
      source: {component: 'nfdctl-agent', host: this.options.nodeName},
      type: 'Warning',
    }
    const write = this.options.client
      .request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, {body: event})
      .then(
        () => {
          if (this.#failing) this.#log.info({}, 'pod Events written again')
          this.#failing = false
        },
        (error: unknown) => {
          this.options.onError?.()
          if (!this.#failing) this.#log.warn({err: errorMessage(error), kind: object.kind, name: object.name, namespace}, 'cannot write an Event; Events are dropped until the API server takes them')
          this.#failing = true
        },
      )
      .finally(() => this.#pending.delete(write))
    this.#pending.add(write)
  }

  /** Waits for the Events in flight. */
  async stop(): Promise<void> {
    await Promise.all([...this.#pending])
  }
}
