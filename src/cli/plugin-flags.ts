import * as Flags from '@oclif/core/flags'

import {ClassMembers} from '../lib/devices/class-members.js'
import {hostCriticalRefusal} from '../lib/devices/host-critical.js'
import {HostMounts} from '../lib/devices/host-mounts.js'
import type {OwnedDevices} from '../lib/devices/owned-devices.js'
import {errorMessage} from '../lib/errors.js'
import {SysfsScanner} from '../lib/devices/sysfs-scanner.js'
import type {DeviceClass} from '../lib/devices/types.js'
import type {Logger} from '../lib/observe/logger.js'
import type {Registry} from '../lib/observe/prometheus.js'
import {createPluginMetrics} from '../lib/plugins/plugin-metrics.js'
import {PluginSet} from '../lib/plugins/plugin-set.js'
import {Signal} from '../lib/signal.js'
import {SourceSupervisor} from '../lib/source-supervisor.js'

/** The kubelet device plugins of the classes: plugins serve runs them, devices agent beside its own work. */
export const pluginFlags = {
  cdi: Flags.boolean({description: 'also name CDI devices in Allocate answers and write a CDI spec per class to --cdi-dir'}),
  'cdi-dir': Flags.string({default: '/var/run/cdi', description: 'where CDI spec files go (with --cdi)'}),
  'plugin-dir': Flags.string({default: '/var/lib/kubelet/device-plugins', description: "kubelet's device-plugin directory (its kubelet.sock and our sockets)"}),
  'udev-data-dir': Flags.string({
    default: '/run/udev/data',
    description: "udev's database: the properties match rules read, and what tells a device plugged in again (its serial number, ID_SERIAL_SHORT, or its port, ID_PATH)",
  }),
}

export interface RawPluginFlags {
  readonly cdi: boolean
  readonly 'cdi-dir': string
  readonly 'plugin-dir': string
  readonly 'udev-data-dir': string
}

export interface ClassPlugins {
  /** This machine's devices. */
  readonly scanner: SysfsScanner
  /** Which of them are in which class; the caller keeps them in step with uevents and tells the plugins. */
  readonly members: ClassMembers
  readonly plugins: PluginSet
  /** The node's mounts and swaps, followed once started (its owner starts and stops it). */
  readonly mounts: HostMounts
  /**
   * The node's mounts changed what the classes serve: the members are judged again and the plugins told;
   * the classes whose served devices changed (none when only a refusal's wording did).
   */
  readonly hostChanged: Signal<ReadonlySet<string>>
}

/**
 * The plugins of `classes` (none yet: the agent sets them as it learns them) over this machine's devices.
 * With `owned` (the agent's), every number that joins a class is recorded, and Allocate answers wait for it.
 */
export function classPlugins(
  flags: RawPluginFlags,
  options: {readonly logger: Logger; readonly registry: Registry; readonly classes?: readonly DeviceClass[]; readonly owned?: OwnedDevices; readonly onOwnedError?: (error: unknown) => void},
): ClassPlugins {
  const {logger, owned} = options
  const scanner = new SysfsScanner({udevDataDir: flags['udev-data-dir']})
  const hostChanged = new Signal<ReadonlySet<string>>()
  const mounts = new HostMounts({
    udevDataDir: flags['udev-data-dir'],
    onChange: () => {
      const touched = members.hostChanged()
      plugins.publish(touched)
      hostChanged.emit(touched)
    },
    onReadError: (what, error) => logger.warn({err: errorMessage(error)}, `cannot read ${what}; the devices it would show as the node's own are not refused`),
  })
  const members = new ClassMembers(scanner.readAttribute, options.classes, {
    onKnown:
      owned === undefined
        ? undefined
        : (device, classes) =>
            void owned.add(device, classes).catch((error: unknown) => {
              options.onOwnedError?.(error)
              options.logger.error({err: errorMessage(error), file: owned.file}, "cannot record the node's class device numbers; kubelet's Allocate and DRA's prepare are refused until it can")
            }),
    refuse: (device, deviceClass) => hostCriticalRefusal(device, deviceClass, mounts.reasonFor),
  })
  const plugins = new PluginSet({
    beforeAllocate: owned === undefined ? undefined : () => owned.saved(),
    cdiDir: flags.cdi ? flags['cdi-dir'] : undefined,
    logger: options.logger,
    members,
    metrics: createPluginMetrics(options.registry),
    pluginDir: flags['plugin-dir'],
    // The plugins' own: a plugin without kubelet is retried for as long as it takes, and is no reason to be unready or to exit.
    supervisor: new SourceSupervisor(),
  })
  return {hostChanged, members, mounts, plugins, scanner}
}
