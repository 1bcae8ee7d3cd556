import {Counter, Gauge, Histogram, type Registry} from '../observe/prometheus.js'

/** `devices agent`'s own metrics (the embedded plugins add theirs, nfdctl_plugin_*). */
export interface AgentMetrics {
  readonly ruleChanges: Counter<'action'>
  readonly errors: Counter<'kind'>
  readonly batchSize: Histogram
  readonly batchSeconds: Histogram
  readonly classDevices: Gauge<'class'>
  readonly classContainers: Gauge<'class'>
  readonly invalidClasses: Gauge
  readonly refusedDevices: Gauge<'class' | 'reason'>
  readonly requestsRefused: Counter<'class' | 'reason'>
}

export function createAgentMetrics(registry: Registry): AgentMetrics {
  const registers = [registry]
  return {
    batchSeconds: new Histogram({
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      help: 'Time to process one batch of events',
      name: 'nfdctl_agent_batch_duration_seconds',
      registers,
    }),
    batchSize: new Histogram({buckets: [1, 2, 5, 10, 20, 50, 100, 500], help: 'Events per processed batch', name: 'nfdctl_agent_batch_events', registers}),
    classContainers: new Gauge({help: 'Running containers holding the class', labelNames: ['class'], name: 'nfdctl_agent_class_containers', registers}),
    classDevices: new Gauge({help: 'Devices of the class present on this node', labelNames: ['class'], name: 'nfdctl_agent_class_devices', registers}),
    errors: new Counter({
      help: 'Errors by kind: containerd, cgroup, pod-resources, status, state, events, unsupported-cgroup, container-root',
      labelNames: ['kind'],
      name: 'nfdctl_agent_errors_total',
      registers,
    }),
    invalidClasses: new Gauge({help: 'Cluster DeviceClasses whose spec is invalid (condition Valid=False)', name: 'nfdctl_agent_invalid_classes', registers}),
    refusedDevices: new Gauge({
      help: 'Devices a class matches on this node but serves to nobody, by reason: ExclusiveOverlap, DuplicateIdentity, HostCritical',
      labelNames: ['class', 'reason'],
      name: 'nfdctl_agent_refused_devices',
      registers,
    }),
    requestsRefused: new Counter({
      help: 'Requests for a class a container may not hold (counted once while the refusal lasts), by reason: annotation-access-off, namespace-not-admitted, allocation-device, capacity, unknown-class',
      labelNames: ['class', 'reason'],
      name: 'nfdctl_agent_requests_refused_total',
      registers,
    }),
    ruleChanges: new Counter({help: 'Device access granted or revoked in running containers', labelNames: ['action'], name: 'nfdctl_agent_rule_changes_total', registers}),
  }
}
