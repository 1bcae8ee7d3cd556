import * as Flags from '@oclif/core/flags'

import {DeviceWatch} from '../../cli/device-watch.js'
import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {clusterGiven, nodeFlags, readNodeClasses} from '../../cli/node-flags.js'
import {listedDevice, renderDevices, renderWatchEvent, type ListedDevice} from '../../cli/render-devices.js'
import {untilAborted} from '../../lib/abort.js'
import {ClassMemory, DeviceMatcher} from '../../lib/devices/device-matcher.js'
import {SysfsScanner} from '../../lib/devices/sysfs-scanner.js'
import {UsageError} from '../../lib/errors.js'

export default class DevicesList extends NfdctlCommand {
  static override description = `Show this machine's character and block devices and the DeviceClasses (devices.nfdctl.io) they belong to.

Classes come from --class-file (YAML or JSON, several documents) and/or the cluster (--kubeconfig, --context). A class whose nodeSelector does not select this node (--node-name, labels from the cluster or --node-label) does not apply. Works without a cluster and without root. --watch streams add, remove and change events from kernel uevents until interrupted.`
  static override enableJsonFlag = true
  static override examples = [
    '<%= config.bin %> <%= command.id %> --class-file classes.yaml',
    '<%= config.bin %> <%= command.id %> --kubeconfig ~/.kube/config --node-name worker-1 -o yaml',
    '<%= config.bin %> <%= command.id %> --class-file classes.yaml --watch',
  ]
  static override flags = {
    all: Flags.boolean({description: 'also show devices in no class'}),
    'class-file': Flags.string({description: 'DeviceClass file (YAML or JSON; repeatable)', multiple: true}),
    'node-label': Flags.string({description: "a label of this node, key=value, for nodeSelectors (repeatable; added to the cluster's)", multiple: true}),
    output: Flags.option({char: 'o', default: 'table', description: 'output format', options: ['table', 'json', 'yaml'] as const})(),
    watch: Flags.boolean({char: 'w', description: 'after the list, stream device events until interrupted'}),
    ...nodeFlags,
  }

  async run(): Promise<ListedDevice[]> {
    const {flags} = await this.parse(DevicesList)
    if (flags.watch && this.jsonEnabled()) throw new UsageError('--json cannot stream; use --watch -o json for one JSON object per line')
    const flagLabels = parseNodeLabels(flags['node-label'] ?? [])
    const {found} = await readNodeClasses(flags, {extraLabels: flagLabels, signal: this.signal, useCluster: clusterGiven(flags)})
    for (const warning of found.warnings) this.warnAlways(warning)
    const {all: classes, applicable} = found
    const showAll = flags.all || classes.length === 0
    if (classes.length === 0 && !this.jsonEnabled()) this.warn('no DeviceClasses given (--class-file, --kubeconfig): showing every device')
    const matcher = new DeviceMatcher(applicable)
    const scanner = new SysfsScanner({})
    const format = flags.output as 'json' | 'table' | 'yaml'
    const keep = (d: ListedDevice): boolean => showAll || d.classes.length > 0

    if (!flags.watch) {
      const listed = (await scanner.scanAll()).map((d) => listedDevice(d, matcher.classesOf(d, scanner.readAttribute))).filter(keep)
      this.log(renderDevices(listed, format))
      return listed
    }

    const memory = new ClassMemory(matcher, scanner.readAttribute)
    const watch = new DeviceWatch(this.signal, {
      onEvent: ({action, device}) => {
        const listed = listedDevice(device, memory.classesAfter(action, device))
        if (keep(listed)) this.log(renderWatchEvent({...listed, event: action}, format))
      },
      source: scanner,
    })
    let initial: ListedDevice[] = []
    await watch.start((devices) => {
      initial = devices.map((d) => listedDevice(d, memory.classesAfter('add', d))).filter(keep)
      if (format === 'table') this.log(renderDevices(initial, 'table'))
      else for (const d of initial) this.log(renderWatchEvent({...d, event: 'present'}, format))
    })
    await untilAborted(watch.signal)
    await watch.stop()
    watch.throwIfFailed()
    return initial
  }
}

function parseNodeLabels(pairs: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {}
  for (const pair of pairs) {
    const eq = pair.indexOf('=')
    if (eq <= 0) throw new UsageError(`--node-label must be key=value, got "${pair}"`)
    labels[pair.slice(0, eq)] = pair.slice(eq + 1)
  }
  return labels
}
