import * as Flags from '@oclif/core/flags'

import {DeviceWatch} from '../../cli/device-watch.js'
import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {clusterGiven, nodeFlags, readNodeClasses} from '../../cli/node-flags.js'
import {observeFlags} from '../../cli/observe-flags.js'
import {classPlugins, pluginFlags} from '../../cli/plugin-flags.js'
import {untilAborted} from '../../lib/abort.js'
import {UsageError} from '../../lib/errors.js'
import {HealthServer} from '../../lib/observe/health-server.js'
import {DeviceRefusals} from '../../lib/plugins/device-refusals.js'
import {checkMountTable} from '../../lib/plugins/mount-table-check.js'
import {createLogger} from '../../lib/observe/logger.js'
import {observeOptionsFrom} from '../../lib/observe/observe-options.js'
import {Registry} from '../../lib/observe/prometheus.js'

export default class PluginsServe extends NfdctlCommand {
  static override description = `Run one kubelet device plugin per DeviceClass (devices.nfdctl.io): pods request a class with the resource limit devices.nfdctl.io/<class>: N.

Each class is served on <plugin-dir>/nfdctl-<class>.sock and registered with kubelet. Devices the node itself uses (what backs its mounts and swap, as PID 1's mount table shows them, followed as they change) are served only by a class with hostCritical: Allow: plugins serve exits 1 where it cannot see the node's mount table (run it in the host's PID namespace: hostPID: true). Class allocation advertises "capacity" slots, and a container gets every device of the class present when it starts; Device allocation advertises one ID per device (Unhealthy once it is gone). Device lists follow kernel uevents at once. When kubelet restarts, every plugin serves again and re-registers. Classes come from the cluster (--kubeconfig, --context, $KUBECONFIG, in-cluster) and/or --class-file; with only --class-file, no cluster is needed. SIGTERM stops the servers and removes their sockets.`
  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --class-file classes.yaml --class loop',
    '<%= config.bin %> <%= command.id %> --kubeconfig ~/.kube/config --node-name worker-1 --cdi',
  ]
  static override flags = {
    class: Flags.string({description: 'serve only this class (repeatable; default: every class that applies to this node)', multiple: true}),
    'class-file': Flags.string({description: 'DeviceClass file (YAML or JSON; repeatable)', multiple: true}),
    ...nodeFlags,
    ...pluginFlags,
    ...observeFlags,
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(PluginsServe)
    const observe = observeOptionsFrom(flags, Boolean(process.stdout.isTTY))
    if (flags['plugin-dir'].trim() === '') throw new UsageError('--plugin-dir must be a directory, got ""')
    // With only --class-file no cluster is needed; without it, the cluster is found as kubectl finds it.
    const useCluster = clusterGiven(flags) || (flags['class-file'] ?? []).length === 0
    const {found, nodeName} = await readNodeClasses(flags, {signal: this.signal, useCluster})
    const log = createLogger({base: {component: 'plugins', node: nodeName}, format: observe.logFormat, level: observe.logLevel})
    for (const warning of found.warnings) log.warn({}, warning)
    const wanted = flags.class ?? []
    const unknown = wanted.filter((name) => !found.all.some((c) => c.metadata.name === name))
    if (unknown.length > 0)
      throw new UsageError(`unknown DeviceClass ${unknown.join(', ')}: the known ones are ${found.all.map((c) => c.metadata.name).join(', ') || 'none'} (--class-file, the cluster)`)
    const notHere = wanted.filter((name) => !found.applicable.some((c) => c.metadata.name === name))
    if (notHere.length > 0) throw new UsageError(`DeviceClass ${notHere.join(', ')} does not apply to node ${nodeName} (its nodeSelector); set --node-name or drop --class`)
    const dra = wanted.filter((name) => found.applicable.some((c) => c.metadata.name === name && c.spec.allocation === 'DRA'))
    if (dra.length > 0) throw new UsageError(`DeviceClass ${dra.join(', ')} has allocation DRA, which no device plugin serves; run devices agent --dra for it, or drop --class`)
    const classes = (wanted.length > 0 ? found.applicable.filter((c) => wanted.includes(c.metadata.name)) : found.applicable).filter((c) => c.spec.allocation !== 'DRA')
    if (classes.length === 0) {
      const onlyDra = found.applicable.length > 0 ? ' that a device plugin serves (the ones here have allocation DRA: devices agent --dra serves them)' : ''
      throw new UsageError(`no DeviceClass applies to node ${nodeName}${onlyDra}: create one (kubectl apply) or give --class-file`)
    }

    // Exit 1 before serving a disk the node mounts: without the node's mount table it would not be refused.
    await checkMountTable({pluginDir: flags['plugin-dir']})
    const registry = new Registry()
    const {hostChanged, members, mounts, plugins, scanner} = classPlugins(flags, {classes, logger: log, registry})
    const refusals = new DeviceRefusals(log, registry)
    const logRefusals = (): void => refusals.tell(members.refusals())
    hostChanged.listen(logRefusals)
    const health = new HealthServer({host: observe.metricsHost, port: observe.metricsPort, readiness: () => plugins.status(), registry})
    const watch = new DeviceWatch(this.signal, {
      coalesceChanges: true,
      logger: log,
      onEvent: ({action, device}) => {
        plugins.publish(members.deviceEvent(action, device))
        logRefusals()
      },
      source: scanner,
    })
    mounts.start(watch.signal)
    await watch.start((devices) => {
      for (const device of devices) members.deviceEvent('add', device)
      logRefusals()
    })
    if (observe.metricsPort > 0) await health.start()
    log.info({cdi: flags.cdi, classes: plugins.classNames, metricsPort: observe.metricsPort, pluginDir: flags['plugin-dir']}, 'plugins serve starting')
    await plugins.start()
    await untilAborted(watch.signal)
    const {reason} = watch.signal
    log.info({reason: reason instanceof Error ? reason.message : String(reason)}, 'shutting down')
    await watch.stop()
    mounts.stop()
    await plugins.stop()
    await health.stop()
    log.info({}, 'stopped')
    watch.throwIfFailed()
  }
}
