import {Counter, Gauge, type Registry} from '../observe/prometheus.js'

/** The device plugins' metrics, per class (`devices agent` embeds the same servers and so the same names). */
export interface PluginMetrics {
  readonly registrations: Counter<'class'>
  readonly registered: Gauge<'class'>
  readonly listAndWatchSends: Counter<'class'>
  readonly allocateCalls: Counter<'class'>
  readonly errors: Counter<'class' | 'kind'>
  readonly devices: Gauge<'class' | 'health'>
}

export function createPluginMetrics(registry: Registry): PluginMetrics {
  const registers = [registry]
  return {
    allocateCalls: new Counter({help: 'Allocate calls from kubelet, one per container', labelNames: ['class'], name: 'nfdctl_plugin_allocate_calls_total', registers}),
    devices: new Gauge({help: 'Devices the plugin advertises to kubelet (Class allocation: slots)', labelNames: ['class', 'health'], name: 'nfdctl_plugin_devices', registers}),
    errors: new Counter({help: 'Plugin errors by kind: register, serve, allocate, cdi', labelNames: ['class', 'kind'], name: 'nfdctl_plugin_errors_total', registers}),
    listAndWatchSends: new Counter({help: 'Device lists sent to kubelet on ListAndWatch streams', labelNames: ['class'], name: 'nfdctl_plugin_list_and_watch_sends_total', registers}),
    registered: new Gauge({help: '1 while the class is registered with the running kubelet', labelNames: ['class'], name: 'nfdctl_plugin_registered', registers}),
    registrations: new Counter({help: 'Successful registrations with kubelet (one more after each kubelet restart)', labelNames: ['class'], name: 'nfdctl_plugin_registrations_total', registers}),
  }
}
