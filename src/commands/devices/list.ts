import * as Flags from '@oclif/core/flags'

import {DeviceWatch} from '../../cli/device-watch.js'
import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {clusterGiven, nodeFlags, readNodeClasses} from '../../cli/node-flags.js'
import {listedDevice, refusalLines, renderDevices, renderWatchEvent, type ListedDevice} from '../../cli/render-devices.js'
import {untilAborted} from '../../lib/abort.js'
import {ClassMemory, DeviceMatcher} from '../../lib/devices/device-matcher.js'
import {refusingClasses} from '../../lib/devices/host-critical.js'
import {HostMounts} from '../../lib/devices/host-mounts.js'
import {SysfsScanner} from '../../lib/devices/sysfs-scanner.js'
import type {Device} from '../../lib/devices/types.js'
import {errorMessage, UsageError} from '../../lib/errors.js'

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
    const mounts = new HostMounts({onReadError: (what, error) => this.warnAlways(`cannot read ${what} (${errorMessage(error)}): devices it would show as the node's own are not marked`)})
    const byName = new Map(applicable.map((c) => [c.metadata.name, c]))
    const listed = (device: Device, matched: string[]): ListedDevice => listedDevice(device, matched, refusingClasses(device, matched, byName, mounts.reasonFor))
    const format = flags.output as 'json' | 'table' | 'yaml'
    const keep = (d: ListedDevice): boolean => showAll || d.classes.length > 0 || d.refused !== undefined

    if (!flags.watch) {
      const devices = (await scanner.scanAll()).map((d) => listed(d, matcher.classesOf(d, scanner.readAttribute))).filter(keep)
      this.log(renderDevices(devices, format))
      if (format === 'table') for (const line of refusalLines(devices)) this.warnAlways(line)
      return devices
    }

    const memory = new ClassMemory(matcher, scanner.readAttribute)
    const watch = new DeviceWatch(this.signal, {
      onEvent: ({action, device}) => {
        const event = listed(device, memory.classesAfter(action, device))
        if (keep(event)) this.log(renderWatchEvent({...event, event: action}, format))
      },
      source: scanner,
    })
    let initial: ListedDevice[] = []
    await watch.start((devices) => {
      initial = devices.map((d) => listed(d, memory.classesAfter('add', d))).filter(keep)
      if (format === 'table') {
        this.log(renderDevices(initial, 'table'))
        for (const line of refusalLines(initial)) this.warnAlways(line)
      } else for (const d of initial) this.log(renderWatchEvent({...d, event: 'present'}, format))
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
