import {expect} from 'chai'
import {existsSync, statSync} from 'node:fs'

import {SysfsScanner} from '../../src/lib/devices/sysfs-scanner.js'
import type {Device} from '../../src/lib/devices/types.js'
import {missingPrerequisite} from '../support/prerequisites.js'

// The scanner on the machine's own /sys and /dev (the fake trees are in test/unit/devices/sysfs-scanner.test.ts).

/** glibc's gnu_dev_major/minor. BigInt, because JS number shifts work on 32 bits and `>> 32` would be `>> 0`. */
function decodeRdev(rdev: bigint): {major: number; minor: number} {
  return {
    major: Number(((rdev & 0xf_ff00n) >> 8n) | ((rdev & 0xffff_f000_0000_0000n) >> 32n)),
    minor: Number((rdev & 0xffn) | ((rdev & 0xfff_fff0_0000n) >> 12n)),
  }
}

describe('SysfsScanner on this machine', function () {
  let scanner: SysfsScanner
  let devices: Device[]
  let scanMs: number

  before(async function () {
    if (!existsSync('/sys/dev/char/1:3')) missingPrerequisite(this, 'this machine has no /sys/dev/char/1:3 (no sysfs?)')
    scanner = new SysfsScanner({})
    const started = performance.now()
    devices = await scanner.scanAll()
    scanMs = performance.now() - started
  })

  it('decodes rdev like glibc (self-check of the test helper)', () => {
    expect(decodeRdev(0x103n)).to.deep.equal({major: 1, minor: 3})
    // makedev(10, 256), makedev(4095, 1048575) and makedev(4096, 1048576)
    expect(decodeRdev(0x10_0a00n)).to.deep.equal({major: 10, minor: 256})
    expect(decodeRdev(0xffff_ffffn)).to.deep.equal({major: 4095, minor: 1_048_575})
    expect(decodeRdev(0x1001_0000_0000n)).to.deep.equal({major: 4096, minor: 1_048_576})
  })

  it('completes a full scan in well under 5 s', () => {
    expect(scanMs).to.be.below(5000)
    expect(devices.length).to.be.greaterThan(0)
  })

  it('finds /dev/null', () => {
    const devNull = devices.find((device) => device.id === 'c1:3')
    expect(devNull).to.include({devName: 'null', devNode: '/dev/null', devPath: '/devices/virtual/mem/null', kernelName: 'null', major: 1, minor: 3, subsystem: 'mem', type: 'char'})
  })

  it('returns unique ids in type, major, minor order', () => {
    expect(new Set(devices.map((device) => device.id)).size).to.equal(devices.length)
    const sorted = [...devices].sort((a, b) => a.type.localeCompare(b.type) || a.major - b.major || a.minor - b.minor)
    expect(devices.map((device) => device.id)).to.deep.equal(sorted.map((device) => device.id))
  })

  it('agrees with the device nodes in /dev on type and numbers', () => {
    let checked = 0
    for (const device of devices) {
      const stats = statSync(device.devNode, {bigint: true, throwIfNoEntry: false})
      if (stats === undefined) continue
      expect(device.type === 'char' ? stats.isCharacterDevice() : stats.isBlockDevice(), device.devNode).to.equal(true)
      expect(decodeRdev(stats.rdev), device.devNode).to.deep.equal({major: device.major, minor: device.minor})
      checked++
    }

    expect(checked).to.be.greaterThan(0)
  })

  it("reads each device's own dev attribute", () => {
    for (const device of devices) expect(scanner.readAttribute(device, 'dev'), device.devPath).to.equal(`${device.major}:${device.minor}`)
  })

  it('reads a block disk size and walks up to a parent attribute', function () {
    const blockDisk = devices.find((device) => device.type === 'block' && device.devType === 'disk')
    if (blockDisk === undefined) return missingPrerequisite(this, 'this machine has no block disk in /sys')
    expect(scanner.readAttribute(blockDisk, 'size')).to.match(/^\d+$/)
    // Every device below /sys/devices has a `power` directory, never a `power` file, and no `nonexistent` attribute.
    expect(scanner.readAttribute(blockDisk, 'power')).to.equal(undefined)
    expect(scanner.readAttribute(blockDisk, 'nonexistent-attribute')).to.equal(undefined)
  })

  it('scanOne returns /dev/null and nothing for pairs the kernel does not have', async () => {
    expect(await scanner.scanOne('char', 1, 3)).to.deep.equal(devices.find((device) => device.id === 'c1:3'))
    // Major 0 is the kernel's "unnamed" major: never a device node.
    expect(existsSync('/sys/dev/char/0:0')).to.equal(false)
    expect(await scanner.scanOne('char', 0, 0)).to.equal(undefined)
    expect(existsSync('/sys/dev/block/1:3')).to.equal(false)
    expect(await scanner.scanOne('block', 1, 3)).to.equal(undefined)
  })
})
