// npm run bench:devices -- [--cycles 100] [--scans 20]
//
// 1. Time to scan every char and block device from /sys (SysfsScanner.scanAll), over --scans runs.
// 2. uevent parse throughput (parseUevent over realistic kernel datagrams).
// 3. uevent-to-output latency of the built `devices list --watch -o json`: a real loop device is created
//    and removed through /dev/loop-control --cycles times; each is timed from the moment the kernel's
//    uevent reaches this process (its own netlink socket: the multicast reaches both at once) until the
//    CLI's line for it arrives on the pipe. The time from the ioctl is printed too (it includes the
//    kernel's own work: removing a disk waits for RCU grace periods). Needs root.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'

import {SysfsScanner} from '../src/lib/devices/sysfs-scanner.js'
import {parseUevent} from '../src/lib/devices/uevent.js'
import {NetlinkUeventSocket} from '../src/lib/sys/netlink-uevents.js'
import {repoRoot} from '../harness/controlplane/paths.js'
import {canUseLoopControl, loopControlAsync, removeLoopDevice} from '../harness/devices/loop-devices.js'
import {firstLoop} from '../harness/devices/loop-owners.js'
import {CliProcess} from '../harness/process/cli-process.js'
import {waitFor} from '../harness/process/wait.js'

const {values} = parseArgs({options: {cycles: {default: '100', type: 'string'}, scans: {default: '20', type: 'string'}}})
const cycles = Number(values.cycles)
const scans = Number(values.scans)
if (!Number.isInteger(cycles) || cycles < 1 || !Number.isInteger(scans) || scans < 1) {
  process.stderr.write('bench:devices: --cycles and --scans must be positive whole numbers\n')
  process.exit(2)
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
const row = (name: string, value: string, budget: string, ok: boolean): string => `${name.padEnd(44)} ${value.padEnd(16)} ${budget} ${ok ? 'PASS' : 'FAIL'}`
const lines: string[] = []
let allOk = true
const report = (name: string, value: string, budget: string, ok: boolean): void => {
  allOk &&= ok
  lines.push(row(name, value, budget, ok))
}

// 1. Scan.
const scanner = new SysfsScanner({})
const scanTimes: number[] = []
let count = 0
for (let i = 0; i < scans; i++) {
  const started = performance.now()
  count = (await scanner.scanAll()).length
  scanTimes.push(performance.now() - started)
}
scanTimes.sort((a, b) => a - b)
report(`scan all devices (${count} devices), p50`, `${percentile(scanTimes, 50).toFixed(1)} ms`, 'budget <= 100 ms:', percentile(scanTimes, 50) <= 100)

// 2. Parse throughput.
const samples = [
  [
    'add@/devices/virtual/block/loop900',
    'ACTION=add',
    'DEVPATH=/devices/virtual/block/loop900',
    'SUBSYSTEM=block',
    'MAJOR=7',
    'MINOR=900',
    'DEVNAME=loop900',
    'DEVTYPE=disk',
    'DISKSEQ=31',
    'SEQNUM=830',
  ],
  [
    'add@/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0',
    'ACTION=add',
    'DEVPATH=/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0',
    'SUBSYSTEM=tty',
    'MAJOR=188',
    'MINOR=0',
    'DEVNAME=ttyUSB0',
    'SEQNUM=4242',
  ],
  ['remove@/devices/virtual/bdi/7:900', 'ACTION=remove', 'DEVPATH=/devices/virtual/bdi/7:900', 'SUBSYSTEM=bdi', 'SEQNUM=831'],
].map((parts) => Buffer.from(parts.join('\0') + '\0'))
const total = 300_000
const parseStarted = performance.now()
let parsed = 0
for (let i = 0; i < total; i++) if (parseUevent(samples[i % samples.length])) parsed++
const perSecond = parsed / ((performance.now() - parseStarted) / 1000)
report('uevent parse throughput', `${Math.round(perSecond).toLocaleString('en')} /s`, 'budget >= 100,000 /s:', perSecond >= 100_000)

// 3. Latency through the real CLI.
if (!canUseLoopControl()) {
  lines.push('uevent-to-output latency: skipped, /dev/loop-control is not usable (run as root)')
  allOk = false
} else {
  const dir = mkdtempSync(join(tmpdir(), 'nfdctl-bench-devices-'))
  const classFile = join(dir, 'classes.yaml')
  writeFileSync(
    classFile,
    'apiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nmetadata: {name: bench-loops}\nspec:\n  match: [{subsystem: block, devName: "loop9[0-4][0-9]"}]\n---\napiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nmetadata: {name: null-device}\nspec:\n  match: [{subsystem: mem, devName: "null"}]\n',
  )
  const watch = new CliProcess(['devices', 'list', '--class-file', classFile, '--watch', '-o', 'json'], join(repoRoot, 'bin/run.js'))
  const index = firstLoop('bench/devices.ts') + Math.floor(Math.random() * 50)
  const ueventAt = new Map<string, number>()
  const socket = new NetlinkUeventSocket({
    onDatagram: (d) => {
      const at = performance.now()
      const event = parseUevent(d)
      if (event?.env.DEVNAME === `loop${index}`) ueventAt.set(event.action, at)
    },
    onError: (error) => {
      throw error
    },
    onOverflow: () => {},
  })
  await socket.start()
  try {
    await watch.waitForLine<{event: string; devNode: string}>('the initial list', (d) => d.event === 'present' && d.devNode === '/dev/null', 20_000)
    const fromUevent: Record<'add' | 'remove', number[]> = {add: [], remove: []}
    const fromIoctl: Record<'add' | 'remove', number[]> = {add: [], remove: []}
    for (let i = 0; i < cycles; i++) {
      for (const action of ['add', 'remove'] as const) {
        ueventAt.clear()
        const started = performance.now()
        if ((await loopControlAsync(action, index)) < 0) throw new Error(`loop-control ${action} ${index} failed`)
        const line = await watch.waitForLine<{event: string; devName: string}>(`${action} ${i}`, (d) => d.event === action && d.devName === `loop${index}`, 5000)
        const kernelAt = await waitFor(`the ${action} uevent`, async () => ueventAt.get(action), {intervalMs: 1, timeoutMs: 5000})
        fromUevent[action].push(line.at - kernelAt)
        fromIoctl[action].push(line.at - started)
        watch.lines.length = 0 // keep the next search short and unambiguous
      }
    }
    for (const action of ['add', 'remove'] as const) {
      const sorted = fromUevent[action].sort((a, b) => a - b)
      const ioctl = fromIoctl[action].sort((a, b) => a - b)
      report(`loop ${action}: uevent -> --watch line, p50`, `${percentile(sorted, 50).toFixed(2)} ms`, '', true)
      report(`loop ${action}: uevent -> --watch line, p95`, `${percentile(sorted, 95).toFixed(2)} ms`, 'budget <= 50 ms:', percentile(sorted, 95) <= 50)
      report(`loop ${action}: ioctl -> --watch line, p50 / p95`, `${percentile(ioctl, 50).toFixed(1)} / ${percentile(ioctl, 95).toFixed(1)} ms`, '(includes kernel time)', true)
    }
    lines.push(`(${cycles} add/remove cycles of /dev/loop${index})`)
  } finally {
    await socket.stop()
    removeLoopDevice(index)
    await watch.stop('SIGINT')
    rmSync(dir, {force: true, recursive: true})
  }
}
process.stdout.write(lines.join('\n') + '\n')
process.exitCode = allOk ? 0 : 1
