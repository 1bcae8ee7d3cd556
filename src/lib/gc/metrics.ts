import {Counter, Gauge, Histogram, type Registry} from '../observe/prometheus.js'

import type {WindowStats} from '../kube/concurrency-window.js'

/** The collector's metrics: upstream nfd-gc's three names, plus sweep, staleness, list and leader figures. */
export interface GcMetrics {
  readonly deleted: Counter<'kind'>
  readonly deleteFailures: Counter<'kind'>
  readonly kept: Counter<'kind' | 'reason'>
  readonly sweepDuration: Histogram
  readonly lastSuccessfulSweep: Gauge
  readonly staleFound: Gauge<'kind'>
  readonly listErrors: Counter<'resource'>
  readonly leader: Gauge
  readonly sweepsRefused: Counter
}

/** `apiWindow`: the client's concurrency window, read at scrape time. */
export function createGcMetrics(registry: Registry, version: string, apiWindow?: () => Readonly<WindowStats>): GcMetrics {
  const registers = [registry]
  new Gauge({help: 'Build information of the garbage collector', labelNames: ['version'], name: 'nfd_gc_build_info', registers}).set({version}, 1)
  if (apiWindow) {
    new Counter({
      collect() {
        this.reset()
        this.inc(apiWindow().throttled)
      },
      help: 'API answers 429 Too Many Requests (API Priority and Fairness); each was retried after its Retry-After',
      name: 'nfd_gc_api_throttled_total',
      registers,
    })
    new Gauge({
      collect() {
        this.set(apiWindow().limit)
      },
      help: "Requests the collector may have in flight now, adapted to the server's answers (at most --concurrency)",
      name: 'nfd_gc_api_concurrency',
      registers,
    })
  }
  return {
    deleteFailures: new Counter({help: 'Number of object deletions that failed', labelNames: ['kind'], name: 'nfd_gc_object_delete_failures_total', registers}),
    deleted: new Counter({help: 'Number of objects deleted by the garbage collector', labelNames: ['kind'], name: 'nfd_gc_objects_deleted_total', registers}),
    kept: new Counter({
      help: 'Objects judged stale but kept when deleting them: changed since judged (reason="changed") or re-created (reason="replaced")',
      labelNames: ['kind', 'reason'],
      name: 'nfd_gc_objects_kept_total',
      registers,
    }),
    lastSuccessfulSweep: new Gauge({help: 'Unix time of the last sweep that completed without errors', name: 'nfd_gc_last_successful_sweep_timestamp_seconds', registers}),
    leader: new Gauge({help: '1 while this replica holds the leader lease (always 1 without --leader-elect)', name: 'nfd_gc_leader', registers}),
    listErrors: new Counter({help: 'Lists that failed after retries', labelNames: ['resource'], name: 'nfd_gc_list_errors_total', registers}),
    staleFound: new Gauge({help: 'Stale objects found by the last sweep', labelNames: ['kind'], name: 'nfd_gc_stale_objects', registers}),
    sweepDuration: new Histogram({buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], help: 'Duration of full sweeps', name: 'nfd_gc_sweep_duration_seconds', registers}),
    sweepsRefused: new Counter({help: 'Sweeps refused by a safety guard (nothing deleted)', name: 'nfd_gc_sweeps_refused_total', registers}),
  }
}
