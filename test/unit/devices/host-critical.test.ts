import {mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {ClassMembers} from '../../../src/lib/devices/class-members.js'
import {type BlockDeviceNode, hostCriticalReason, hostCriticalRefusal, nodeBlockUse, parseMountInfo, parseSwaps} from '../../../src/lib/devices/host-critical.js'
import {HostMounts} from '../../../src/lib/devices/host-mounts.js'
import type {Device, DeviceClass} from '../../../src/lib/devices/types.js'
import {deviceClass} from '../../support/device-class.js'

const device = (type: Device['type'], major: number, minor: number, devName: string, subsystem = type === 'block' ? 'block' : 'mem'): Device => ({
  devName,
  devNode: `/dev/${devName}`,
  devPath: `/devices/virtual/${subsystem}/${devName}`,
  id: `${type === 'block' ? 'b' : 'c'}${major}:${minor}`,
  kernelName: devName,
  major,
  minor,
  properties: {},
  subsystem,
  type,
})

const nothingMounted = {block: new Map<string, string>()}

// A node with LVM on the NVMe disk's second partition (root and an unmounted data volume), /boot on the first
// partition, a RAID1 of two SATA disks mounted at /srv, swap on a zram device, and a USB stick nobody mounted.
const disks: BlockDeviceNode[] = [
  {below: [], devNumber: '259:0', name: 'nvme0n1'},
  {below: ['nvme0n1'], devNumber: '259:1', name: 'nvme0n1p1', partition: true},
  {below: ['nvme0n1'], devNumber: '259:2', name: 'nvme0n1p2', partition: true},
  {below: ['nvme0n1p2'], devNumber: '253:0', dmUuid: 'LVM-r00t', mapperName: 'vg-root', name: 'dm-0'},
  {below: ['nvme0n1p2'], devNumber: '253:1', dmUuid: 'LVM-d4t4', mapperName: 'vg-data', name: 'dm-1'},
  {below: [], devNumber: '8:0', name: 'sda'},
  {below: [], devNumber: '8:16', name: 'sdb'},
  {below: ['sda', 'sdb'], devNumber: '9:0', name: 'md0'},
  {below: [], devNumber: '8:32', name: 'sdc'},
  {below: ['sdc'], devNumber: '8:33', name: 'sdc1', partition: true},
  {below: [], devNumber: '252:0', name: 'zram0'},
]

const mountinfo = [
  '22 27 0:21 / /proc rw,relatime shared:12 - proc proc rw',
  '27 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw',
  '30 27 259:1 / /boot rw,relatime shared:2 master:1 - vfat /dev/nvme0n1p1 rw',
  '31 27 9:0 / /srv rw,relatime - xfs /dev/md0 rw',
  // A pod's view of the root filesystem, bind-mounted deeper: the shallowest mount names the device.
  '40 27 253:0 /var/lib/kubelet/pods/x /var/lib/kubelet/pods/x rw - ext4 /dev/mapper/vg-root rw',
  '41 27 0:45 / /mnt/with\\040space rw - tmpfs tmpfs rw',
].join('\n')

describe('host-critical devices', () => {
  describe('hostCriticalReason: the mem subsystem', () => {
    for (const [minor, name] of [
      [1, 'mem'],
      [2, 'kmem'],
      [4, 'port'],
      [11, 'kmsg'],
    ] as const) {
      it(`/dev/${name} (c1:${minor}) is critical on every node`, () => {
        expect(hostCriticalReason(device('char', 1, minor, name), nothingMounted)).to.match(new RegExp(`^/dev/${name} is `))
      })
    }
    for (const [minor, name] of [
      [3, 'null'],
      [5, 'zero'],
      [7, 'full'],
      [8, 'random'],
      [9, 'urandom'],
    ] as const) {
      it(`/dev/${name} (c1:${minor}) is not`, () => {
        expect(hostCriticalReason(device('char', 1, minor, name), nothingMounted)).to.equal(undefined)
      })
    }
    it('judges character devices by number, not by name: a ttyUSB named kmsg is not critical', () => {
      expect(hostCriticalReason(device('char', 188, 11, 'kmsg', 'tty'), nothingMounted)).to.equal(undefined)
    })
  })

  describe('nodeBlockUse: the block devices the node uses', () => {
    const use = nodeBlockUse(parseMountInfo(mountinfo), ['/dev/zram0'], disks).block

    it('names a mounted device by its shallowest mount, and everything below it (dm over a partition over a disk)', () => {
      expect(use.get('b253:0')).to.equal("/dev/dm-0 backs the node's mount /")
      expect(use.get('b259:2')).to.equal("/dev/nvme0n1p2 is below /dev/dm-0, which backs the node's mount /")
      expect(use.get('b259:0')).to.equal("/dev/nvme0n1 is below /dev/dm-0, which backs the node's mount /")
      expect(use.get('b259:1')).to.equal("/dev/nvme0n1p1 backs the node's mount /boot")
    })

    it('covers both members of a mounted md RAID, and swap', () => {
      expect(use.get('b8:0')).to.equal("/dev/sda is below /dev/md0, which backs the node's mount /srv")
      expect(use.get('b8:16')).to.equal("/dev/sdb is below /dev/md0, which backs the node's mount /srv")
      expect(use.get('b252:0')).to.equal("/dev/zram0 is the node's swap")
    })

    it('leaves out what nothing mounted sits on: another volume of the same group, an unmounted stick', () => {
      expect([...use.keys()].sort()).to.deep.equal(['b252:0', 'b253:0', 'b259:0', 'b259:1', 'b259:2', 'b8:0', 'b8:16', 'b9:0'])
      expect(hostCriticalReason(device('block', 253, 1, 'dm-1'), {block: use})).to.equal(undefined)
      expect(hostCriticalReason(device('block', 8, 33, 'sdc1'), {block: use})).to.equal(undefined)
    })

    it('finds a mount by its source when its device number is anonymous (btrfs)', () => {
      const btrfs = nodeBlockUse(parseMountInfo('50 1 0:33 / / rw - btrfs /dev/sdc1 rw'), [], disks).block
      expect(btrfs.get('b8:33')).to.equal("/dev/sdc1 backs the node's mount /")
      expect(btrfs.get('b8:32')).to.equal("/dev/sdc is below /dev/sdc1, which backs the node's mount /")
    })

    it('ignores filesystems without a block device, and sources it does not know', () => {
      const unassembled = disks.filter((d) => d.partition || d.below.length === 0)
      expect(nodeBlockUse(parseMountInfo('1 1 0:21 / /proc rw - proc proc rw\n2 1 0:5 / /x rw - ext4 /dev/disk/by-uuid/abc rw'), [], unassembled).block.size).to.equal(0)
    })
  })

  describe('nodeBlockUse: the members of storage the kernel has assembled, mounted or not', () => {
    // Nothing here is mounted but /: an LVM group with an active volume on a partition, an md array, a
    // dm-crypt mapping, a bcache device with its cache, two btrfs filesystems and a ZFS pool.
    const storage: BlockDeviceNode[] = [
      {below: [], devNumber: '8:64', name: 'sde'},
      {below: ['sde'], devNumber: '8:65', name: 'sde1', partition: true},
      {below: ['sde1'], devNumber: '253:2', dmUuid: 'LVM-abcdef', mapperName: 'my--vg-scratch', name: 'dm-2'},
      {below: [], devNumber: '8:80', name: 'sdf'},
      {below: [], devNumber: '8:96', name: 'sdg'},
      {below: ['sdf', 'sdg'], devNumber: '9:1', name: 'md1'},
      {below: ['md1'], devNumber: '259:9', name: 'md1p1', partition: true},
      {below: [], devNumber: '8:112', name: 'sdh'},
      {below: ['sdh'], devNumber: '253:3', dmUuid: 'CRYPT-LUKS2-0123', mapperName: 'secret', name: 'dm-3'},
      {bcache: {device: 'bcache0', role: 'backing'}, below: [], devNumber: '8:128', name: 'sdi'},
      {bcache: {role: 'cache', set: '5b0c0d9e-1b2e-4d47-9d1e-26c2a8c3f001'}, below: [], devNumber: '8:144', name: 'sdj'},
      {bcache: {role: 'backing'}, below: [], devNumber: '8:240', name: 'sdp'},
      {below: ['sdi', 'sdj'], devNumber: '251:0', name: 'bcache0'},
      {below: [], devNumber: '8:160', name: 'sdk'},
      {below: [], devNumber: '8:176', name: 'sdl'},
      {below: [], devNumber: '8:192', name: 'sdm'},
      {below: [], devNumber: '8:208', name: 'sdn'},
      {below: ['sdn'], devNumber: '8:209', name: 'sdn1', partition: true},
      {below: [], devNumber: '8:224', name: 'sdo'},
      {below: ['sdo'], devNumber: '8:225', name: 'sdo1', partition: true},
      {below: [], devNumber: '7:5', name: 'loop5'},
      {below: ['loop5'], devNumber: '252:0', name: 'drbd0'},
    ]
    const pools = [
      {kind: 'btrfs', members: ['sdk', 'sdl'], name: '56bac79a-3a9e-4447-93c7-8201a09e511f'},
      {kind: 'btrfs', members: ['sdm'], name: '0d1c8a52-93e4-4b5e-a4c0-7f4f1c1d2e3f'},
      {kind: 'zfs', members: ['sdn1'], name: 'tank'},
    ] as const
    const mounts = parseMountInfo(['27 1 8:225 / / rw - ext4 /dev/sdo1 rw', '60 27 0:52 / /data rw - btrfs /dev/sdk rw', '61 60 0:53 /snapshots /data/snapshots rw - btrfs /dev/sdk rw'].join('\n'))
    const use = nodeBlockUse(mounts, [], storage, pools).block

    it('an LVM volume group with an active volume: its physical volumes (and their disks), not the volume', () => {
      expect(use.get('b8:65')).to.equal('/dev/sde1 is a physical volume of the LVM volume group my-vg, whose volume /dev/mapper/my--vg-scratch is active')
      expect(use.get('b8:64')).to.equal('/dev/sde is below /dev/sde1, which is a physical volume of the LVM volume group my-vg, whose volume /dev/mapper/my--vg-scratch is active')
      expect(use.has('b253:2'), 'the volume itself').to.equal(false)
    })

    it('an md array, dm-crypt and any other device built on others: their members, not the device or its partitions', () => {
      expect(use.get('b8:80')).to.equal('/dev/sdf is a member of the md array /dev/md1')
      expect(use.get('b8:96')).to.equal('/dev/sdg is a member of the md array /dev/md1')
      expect(use.get('b8:112')).to.equal('/dev/sdh is below the active device-mapper device /dev/mapper/secret')
      expect(use.get('b7:5')).to.equal('/dev/loop5 is held by /dev/drbd0, which the kernel has built on it')
      for (const id of ['b9:1', 'b259:9', 'b253:3', 'b252:0']) expect(use.has(id), id).to.equal(false)
    })

    it("bcache: a backing device (running or not) and a cache set's cache device, not bcache<N>", () => {
      expect(use.get('b8:128')).to.equal('/dev/sdi is the backing device of /dev/bcache0')
      expect(use.get('b8:144')).to.equal('/dev/sdj is a cache device of the bcache cache set 5b0c0d9e-1b2e-4d47-9d1e-26c2a8c3f001')
      expect(use.get('b8:240')).to.equal('/dev/sdp is a bcache backing device')
      expect(use.has('b251:0')).to.equal(false)
    })

    it("btrfs: every member of a mounted filesystem, named by the node's shallowest mount of it, or said to be mounted elsewhere", () => {
      expect(use.get('b8:160')).to.equal("/dev/sdk backs the node's mount /data")
      expect(use.get('b8:176')).to.equal('/dev/sdl is a member of the btrfs filesystem mounted at /data')
      expect(use.get('b8:192')).to.equal("/dev/sdm is a member of the btrfs filesystem 0d1c8a52-93e4-4b5e-a4c0-7f4f1c1d2e3f, mounted outside the node's mount table")
    })

    it('ZFS: the members of an imported pool, and their disks', () => {
      expect(use.get('b8:209')).to.equal('/dev/sdn1 is a member of the imported ZFS pool tank')
      expect(use.get('b8:208')).to.equal('/dev/sdn is below /dev/sdn1, which is a member of the imported ZFS pool tank')
    })

    it("a mount names a device before the storage it is in; without assembled storage, only the node's mounts count", () => {
      expect(use.get('b8:225')).to.equal("/dev/sdo1 backs the node's mount /")
      expect(use.get('b8:224')).to.equal("/dev/sdo is below /dev/sdo1, which backs the node's mount /")
      const plain = storage.map((d) => ({...d, bcache: undefined, below: d.partition ? d.below : []}))
      expect([...nodeBlockUse(mounts, [], plain).block.keys()].sort()).to.deep.equal(['b8:160', 'b8:224', 'b8:225'])
    })
  })

  describe('parsing', () => {
    it('reads mountinfo lines with and without optional fields, unescaping paths', () => {
      expect(parseMountInfo(mountinfo).map((m) => [m.devNumber, m.mountPoint, m.source])).to.deep.equal([
        ['0:21', '/proc', 'proc'],
        ['253:0', '/', '/dev/mapper/vg-root'],
        ['259:1', '/boot', '/dev/nvme0n1p1'],
        ['9:0', '/srv', '/dev/md0'],
        ['253:0', '/var/lib/kubelet/pods/x', '/dev/mapper/vg-root'],
        ['0:45', '/mnt/with space', 'tmpfs'],
      ])
      expect(parseMountInfo('garbage\n\n')).to.deep.equal([])
    })

    it('reads /proc/swaps', () => {
      const swaps = 'Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/zram0                              partition\t8388604\t\t0\t\t100\n/swap\\040file file 1024 0 -2\n'
      expect(parseSwaps(swaps)).to.deep.equal(['/dev/zram0', '/swap file'])
      expect(parseSwaps('Filename\tType\tSize\tUsed\tPriority\n')).to.deep.equal([])
    })
  })
})

describe('ClassMembers with hostCriticalRefusal: the plugins, the agent and DRA serve what it leaves', () => {
  // loop3 backs a mount of the node here; the other loops do not.
  const mounted = (d: Device): string | undefined => (d.id === 'b7:3' ? "/dev/loop3 backs the node's mount /" : undefined)
  const loop = (i: number): Device => ({...blockLoop3, devName: `loop${i}`, devNode: `/dev/loop${i}`, devPath: `/devices/virtual/block/loop${i}`, id: `b7:${i}`, kernelName: `loop${i}`, minor: i})
  const members = (classes: DeviceClass[]): ClassMembers => new ClassMembers(() => undefined, classes, {refuse: (device, c) => hostCriticalRefusal(device, c, mounted)})

  it('leaves a critical device out of a class without the opt-in, says why, and serves it in one with it', () => {
    const m = members([deviceClass('loops', {match: [{devName: 'loop*'}]}), deviceClass('admin', {hostCritical: 'Allow', match: [{subsystem: 'block'}]})])
    m.deviceEvent('add', loop(3))
    m.deviceEvent('add', loop(4))
    expect(m.of('loops').map((d) => d.id)).to.deep.equal(['b7:4'])
    expect(m.of('admin').map((d) => d.id)).to.deep.equal(['b7:3', 'b7:4'])
    expect(m.refusals().map((r) => [r.className, r.device.id, r.reason, r.message])).to.deep.equal([
      ['loops', 'b7:3', 'HostCritical', "/dev/loop3 backs the node's mount /; set spec.hostCritical: Allow in the class to serve it"],
    ])
    // hostCritical: Refuse is the same as leaving it out.
    m.setClasses([deviceClass('loops', {hostCritical: 'Refuse', match: [{devName: 'loop*'}]})])
    expect(m.of('loops').map((d) => d.id)).to.deep.equal(['b7:4'])
    expect(m.refusals().map((r) => r.device.id)).to.deep.equal(['b7:3'])
  })

  it('asks about a device only for a class without the opt-in', () => {
    const asked: string[] = []
    const m = new ClassMembers(() => undefined, [deviceClass('admin', {hostCritical: 'Allow', match: [{subsystem: 'block'}]})], {
      refuse: (device, c) =>
        hostCriticalRefusal(device, c, (d) => {
          asked.push(d.id)
          return 'critical'
        }),
    })
    m.deviceEvent('add', loop(3))
    expect(asked).to.deep.equal([])
    expect(m.of('admin')).to.have.length(1)
  })
})

describe('HostMounts: reading the mount table, swaps and sysfs', () => {
  let tmp: string

  beforeEach(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'nfdctl-mounts-'))
  })

  afterEach(() => {
    rmSync(tmp, {force: true, recursive: true})
  })

  /** A block device in the fake sysfs: its directory below devices/, and its class/block link. */
  function blockDevice(sys: string, devicePath: string, devNumber: string, extra: {partition?: boolean; slaves?: string[]; mapperName?: string; dmUuid?: string} = {}): string {
    const dir = path.join(sys, 'devices', devicePath)
    mkdirSync(dir, {recursive: true})
    writeFileSync(path.join(dir, 'dev'), `${devNumber}\n`)
    if (extra.partition) writeFileSync(path.join(dir, 'partition'), '1\n')
    if (extra.slaves !== undefined) {
      mkdirSync(path.join(dir, 'slaves'))
      for (const slave of extra.slaves) writeFileSync(path.join(dir, 'slaves', slave), '')
    }
    if (extra.mapperName !== undefined) {
      mkdirSync(path.join(dir, 'dm'))
      writeFileSync(path.join(dir, 'dm', 'name'), `${extra.mapperName}\n`)
      if (extra.dmUuid !== undefined) writeFileSync(path.join(dir, 'dm', 'uuid'), `${extra.dmUuid}\n`)
    }
    mkdirSync(path.join(sys, 'class', 'block'), {recursive: true})
    symlinkSync(path.relative(path.join(sys, 'class', 'block'), dir), path.join(sys, 'class', 'block', path.basename(devicePath)))
    return dir
  }

  const link = (target: string, at: string): void => {
    mkdirSync(path.dirname(at), {recursive: true})
    symlinkSync(path.relative(path.dirname(at), target), at)
  }

  it("reads PID 1's and its own mount table, swaps, partitions, dm names and slaves, resolving /dev links", () => {
    const [proc, sys, dev] = ['proc', 'sys', 'dev'].map((d) => path.join(tmp, d))
    blockDevice(sys, 'pci0000:00/nvme/nvme0/nvme0n1', '259:0')
    blockDevice(sys, 'pci0000:00/nvme/nvme0/nvme0n1/nvme0n1p1', '259:1', {partition: true})
    blockDevice(sys, 'pci0000:00/nvme/nvme0/nvme0n1/nvme0n1p2', '259:2', {partition: true})
    blockDevice(sys, 'virtual/block/dm-0', '253:0', {mapperName: 'vg-root', slaves: ['nvme0n1p2']})
    blockDevice(sys, 'virtual/block/zram0', '252:0')
    blockDevice(sys, 'virtual/block/loop3', '7:3')
    mkdirSync(path.join(proc, '1'), {recursive: true})
    mkdirSync(path.join(proc, 'self'), {recursive: true})
    // The node's table names / by its mapper name; this process's, a by-uuid link to the boot partition.
    writeFileSync(path.join(proc, '1', 'mountinfo'), '27 1 253:0 / / rw - ext4 /dev/mapper/vg-root rw\n')
    writeFileSync(path.join(proc, 'self', 'mountinfo'), '33 1 0:40 / /etc/hosts rw - vfat /dev/disk/by-uuid/B00T rw\n')
    writeFileSync(path.join(proc, 'swaps'), 'Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 8 0 100\n')
    mkdirSync(path.join(dev, 'disk', 'by-uuid'), {recursive: true})
    writeFileSync(path.join(dev, 'nvme0n1p1'), '')
    symlinkSync('../../nvme0n1p1', path.join(dev, 'disk', 'by-uuid', 'B00T'))

    const mounts = new HostMounts({devRoot: dev, procRoot: proc, sysRoot: sys})
    expect(Object.fromEntries(mounts.blockUse().block)).to.deep.equal({
      'b252:0': "/dev/zram0 is the node's swap",
      'b253:0': "/dev/dm-0 backs the node's mount /",
      'b259:0': "/dev/nvme0n1 is below /dev/dm-0, which backs the node's mount /",
      'b259:1': "/dev/nvme0n1p1 backs the node's mount /etc/hosts",
      'b259:2': "/dev/nvme0n1p2 is below /dev/dm-0, which backs the node's mount /",
    })
  })

  it("reads the storage the kernel has assembled: holders and dm UUIDs, bcache's registrations, /sys/fs/btrfs, and imported ZFS pools' members by udev label", () => {
    const [proc, sys, udev] = ['proc', 'sys', 'udev'].map((d) => path.join(tmp, d))
    blockDevice(sys, 'pci/sde', '8:64')
    blockDevice(sys, 'pci/sde/sde1', '8:65', {partition: true})
    blockDevice(sys, 'virtual/block/dm-2', '253:2', {dmUuid: 'LVM-abcdef', mapperName: 'vg-scratch', slaves: ['sde1']})
    blockDevice(sys, 'pci/sdf', '8:80')
    blockDevice(sys, 'virtual/block/md1', '9:1', {slaves: ['sdf']})
    // bcache: the backing device's and the cache device's own `bcache` directories; bcache0's `bcache` links back.
    const sdi = blockDevice(sys, 'pci/sdi', '8:128')
    const sdj = blockDevice(sys, 'pci/sdj', '8:144')
    const bcache0 = blockDevice(sys, 'virtual/block/bcache0', '251:0', {slaves: ['sdi', 'sdj']})
    mkdirSync(path.join(sdi, 'bcache'))
    link(bcache0, path.join(sdi, 'bcache', 'dev'))
    link(path.join(sdi, 'bcache'), path.join(bcache0, 'bcache'))
    mkdirSync(path.join(sys, 'fs', 'bcache', '5b0c0d9e-1b2e-4d47-9d1e-26c2a8c3f001'), {recursive: true})
    mkdirSync(path.join(sdj, 'bcache'))
    link(path.join(sys, 'fs', 'bcache', '5b0c0d9e-1b2e-4d47-9d1e-26c2a8c3f001'), path.join(sdj, 'bcache', 'set'))
    const sdk = blockDevice(sys, 'pci/sdk', '8:160')
    const sdl = blockDevice(sys, 'pci/sdl', '8:176')
    const btrfs = path.join(sys, 'fs', 'btrfs', '56bac79a-3a9e-4447-93c7-8201a09e511f')
    link(sdk, path.join(btrfs, 'devices', 'sdk'))
    link(sdl, path.join(btrfs, 'devices', 'sdl'))
    mkdirSync(path.join(sys, 'fs', 'btrfs', 'features'))
    blockDevice(sys, 'pci/sdn', '8:208')
    blockDevice(sys, 'pci/sdn/sdn1', '8:209', {partition: true})
    blockDevice(sys, 'pci/sdq', '8:256')
    mkdirSync(path.join(proc, 'spl', 'kstat', 'zfs', 'tank'), {recursive: true})
    writeFileSync(path.join(proc, 'spl', 'kstat', 'zfs', 'arcstats'), '')
    mkdirSync(udev)
    writeFileSync(path.join(udev, 'b8:209'), 'S:disk/by-label/tank\nE:ID_FS_TYPE=zfs_member\nE:ID_FS_LABEL=tank\n')
    // A member of a pool that is not imported.
    writeFileSync(path.join(udev, 'b8:256'), 'E:ID_FS_TYPE=zfs_member\nE:ID_FS_LABEL=backup\n')
    mkdirSync(path.join(proc, 'self'), {recursive: true})
    writeFileSync(path.join(proc, 'self', 'mountinfo'), '60 1 0:52 / /data rw - btrfs /dev/sdk rw\n')

    const told: string[] = []
    const mounts = new HostMounts({devRoot: path.join(tmp, 'dev'), onReadError: (what) => told.push(what), procRoot: proc, sysRoot: sys, udevDataDir: udev})
    expect(Object.fromEntries(mounts.blockUse().block)).to.deep.equal({
      'b8:128': '/dev/sdi is the backing device of /dev/bcache0',
      'b8:144': '/dev/sdj is a cache device of the bcache cache set 5b0c0d9e-1b2e-4d47-9d1e-26c2a8c3f001',
      'b8:160': "/dev/sdk backs the node's mount /data",
      'b8:176': '/dev/sdl is a member of the btrfs filesystem mounted at /data',
      'b8:208': '/dev/sdn is below /dev/sdn1, which is a member of the imported ZFS pool tank',
      'b8:209': '/dev/sdn1 is a member of the imported ZFS pool tank',
      'b8:64': '/dev/sde is below /dev/sde1, which is a physical volume of the LVM volume group vg, whose volume /dev/mapper/vg-scratch is active',
      'b8:65': '/dev/sde1 is a physical volume of the LVM volume group vg, whose volume /dev/mapper/vg-scratch is active',
      'b8:80': '/dev/sdf is a member of the md array /dev/md1',
    })
    expect(told.map((what) => path.relative(tmp, what)).sort(), 'only what a node always has').to.deep.equal(['proc/1/mountinfo', 'proc/swaps'])
  })

  it('reads again only when the last reading is older than maxAgeMs, and tells each unreadable source once', () => {
    const [proc, sys] = ['proc', 'sys'].map((d) => path.join(tmp, d))
    blockDevice(sys, 'virtual/block/loop3', '7:3')
    mkdirSync(path.join(proc, 'self'), {recursive: true})
    let now = 0
    const unreadable: string[] = []
    const mounts = new HostMounts({maxAgeMs: 1000, now: () => now, onReadError: (what) => unreadable.push(path.relative(tmp, what)), procRoot: proc, sysRoot: sys})
    const loop3 = {...blockLoop3}
    expect(mounts.reasonFor(loop3)).to.equal(undefined)
    writeFileSync(path.join(proc, 'self', 'mountinfo'), '40 1 7:3 / /mnt/image rw - squashfs /dev/loop3 ro\n')
    now = 1000
    expect(mounts.reasonFor(loop3), 'within maxAgeMs').to.equal(undefined)
    now = 1001
    expect(mounts.reasonFor(loop3)).to.equal("/dev/loop3 backs the node's mount /mnt/image")
    now = 5000
    mounts.reasonFor(loop3)
    expect(unreadable.sort()).to.deep.equal(['proc/1/mountinfo', 'proc/self/mountinfo', 'proc/swaps'])
  })

  it('on this machine, finds the block device under / (if / is on one)', function () {
    const {dev} = statSync('/')
    const major = Math.floor(dev / 256) & 0xfff
    const minor = (dev & 0xff) | ((Math.floor(dev / 4096) & ~0xff) >>> 0)
    if (major === 0) {
      // A container's overlay root: no block device to find.
      if (process.env.CI === 'true') expect.fail('/ is not on a block device on this CI machine')
      this.skip()
    }
    const reason = new HostMounts().reasonFor({...blockLoop3, id: `b${major}:${minor}`, major, minor})
    expect(reason).to.match(/backs the node's mount \/$/)
  })
})

const blockLoop3: Device = {
  devName: 'loop3',
  devNode: '/dev/loop3',
  devPath: '/devices/virtual/block/loop3',
  id: 'b7:3',
  kernelName: 'loop3',
  major: 7,
  minor: 3,
  properties: {},
  subsystem: 'block',
  type: 'block',
}
