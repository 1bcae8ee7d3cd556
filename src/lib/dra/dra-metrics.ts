import {Counter, Gauge, Histogram, type Registry} from '../observe/prometheus.js'

/** The DRA driver's metrics (devices agent --dra). */
export interface DraMetrics {
  readonly errors: Counter<'kind'>
  readonly registered: Gauge
  readonly publishedDevices: Gauge
  readonly preparedClaims: Gauge
  readonly prepareSeconds: Histogram
}

export function createDraMetrics(registry: Registry): DraMetrics {
  const registers = [registry]
  return {
    errors: new Counter({
      help: 'DRA driver errors by kind: slices, deviceclasses, claim-status, prepare, unprepare, serve, state',
      labelNames: ['kind'],
      name: 'nfdctl_dra_errors_total',
      registers,
    }),
    prepareSeconds: new Histogram({
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      help: 'Time to answer one NodePrepareResources call',
      name: 'nfdctl_dra_prepare_duration_seconds',
      registers,
    }),
    preparedClaims: new Gauge({help: 'ResourceClaims prepared on this node', name: 'nfdctl_dra_prepared_claims', registers}),
    publishedDevices: new Gauge({help: "Devices in this node's ResourceSlices", name: 'nfdctl_dra_published_devices', registers}),
    registered: new Gauge({help: '1 while kubelet has the DRA driver registered', name: 'nfdctl_dra_registered', registers}),
  }
}
