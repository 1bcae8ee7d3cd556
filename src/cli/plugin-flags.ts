import * as Flags from '@oclif/core/flags'

import {ClassMembers} from '../lib/devices/class-members.js'
import {SysfsScanner} from '../lib/devices/sysfs-scanner.js'
import type {DeviceClass} from '../lib/devices/types.js'
import type {Logger} from '../lib/observe/logger.js'
import type {Registry} from '../lib/observe/prometheus.js'
import {createPluginMetrics} from '../lib/plugins/plugin-metrics.js'
import {PluginSet} from '../lib/plugins/plugin-set.js'

/** The kubelet device plugins of the classes: plugins serve runs them, devices agent beside its own work. */
export const pluginFlags = {
  cdi: Flags.boolean({description: 'also name CDI devices in Allocate answers and write a CDI spec per class to --cdi-dir'}),
  'cdi-dir': Flags.string({default: '/var/run/cdi', description: 'where CDI spec files go (with --cdi)'}),
  'plugin-dir': Flags.string({default: '/var/lib/kubelet/device-plugins', description: "kubelet's device-plugin directory (its kubelet.sock and our sockets)"}),
  'udev-data-dir': Flags.string({default: '/run/udev/data', description: "udev's database (ID_SERIAL and other properties that match rules and stable device IDs read)"}),
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
}

/** The plugins of `classes` (none yet: the agent sets them as it learns them) over this machine's devices. */
export function classPlugins(flags: RawPluginFlags, options: {readonly logger: Logger; readonly registry: Registry; readonly classes?: readonly DeviceClass[]}): ClassPlugins {
  const scanner = new SysfsScanner({udevDataDir: flags['udev-data-dir']})
  const members = new ClassMembers(scanner.readAttribute, options.classes)
  const plugins = new PluginSet({
    cdiDir: flags.cdi ? flags['cdi-dir'] : undefined,
    logger: options.logger,
    members,
    metrics: createPluginMetrics(options.registry),
    pluginDir: flags['plugin-dir'],
  })
  return {members, plugins, scanner}
}
