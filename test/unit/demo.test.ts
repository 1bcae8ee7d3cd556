import {expect} from 'chai'

import {deviceHalfNeeds, deviceHalfNotice, missingPackages, type MachineProbe} from '../../scripts/demo/device-prerequisites.js'
import {grantsOf, secondsBetween, timedLines} from '../../scripts/demo/log-lines.js'

const machine = (uid: number | undefined, missing: readonly string[] = [], loopControl = true): MachineProbe => ({has: (find) => !missing.includes(find), loopControl, uid})

describe('npm run demo: whether the device half runs here (scripts/demo/device-prerequisites.ts)', function () {
  it('runs as root with every package and a usable /dev/loop-control', function () {
    expect(deviceHalfNotice(machine(0))).to.equal(undefined)
  })

  it('without root: one line naming root and how to run it, and that the GC half is shown', function () {
    expect(deviceHalfNotice(machine(65534))).to.equal('the device half needs root (sudo npm run demo); showing the GC half only')
    expect(deviceHalfNotice(machine(undefined))).to.equal('the device half needs root (sudo npm run demo); showing the GC half only')
  })

  it('names each missing command or file and the Debian packages to install, each package once', function () {
    expect(deviceHalfNotice(machine(0, ['runc', 'iptables', '/usr/lib/cni/bridge', 'losetup']))).to.equal(
      'the device half needs runc, the CNI bridge plugin, iptables and losetup (apt-get install runc containernetworking-plugins iptables mount); showing the GC half only',
    )
  })

  it('without root and without packages: both, the packages first', function () {
    expect(deviceHalfNotice(machine(1000, ['runc', '/bin/busybox']))).to.equal(
      'the device half needs root, runc and busybox-static (apt-get install runc busybox-static; then sudo npm run demo); showing the GC half only',
    )
  })

  it('as root without the loop driver: says so', function () {
    expect(deviceHalfNotice(machine(0, [], false))).to.equal('the device half needs a usable /dev/loop-control (modprobe loop); showing the GC half only')
  })

  it('asks about every command the node harness and the image build run (containerd and ctr are built with the control plane)', function () {
    const asked: string[] = []
    deviceHalfNotice({has: (find) => asked.push(find) > 0, loopControl: true, uid: 0})
    expect(asked).to.have.members([
      'runc',
      '/bin/busybox',
      '/usr/lib/cni/bridge',
      'iptables',
      'ip',
      'losetup',
      'nsenter',
      'dpkg-deb',
      'gzip',
      'xz',
      'gpgv',
      '/usr/share/keyrings/debian-archive-keyring.gpg',
    ])
    expect(deviceHalfNeeds.every((need) => need.debianPackage !== '')).to.equal(true)
  })
})

describe('npm run demo: the packages it installs as root (missingPackages)', function () {
  it('each Debian package that brings something missing, once, in the order of the needs', function () {
    expect(missingPackages(machine(0, ['nsenter', 'losetup', 'gpgv', '/usr/share/keyrings/debian-archive-keyring.gpg']))).to.deep.equal(['mount', 'util-linux', 'gpgv', 'debian-archive-keyring'])
    expect(missingPackages(machine(0))).to.deep.equal([])
  })
})

describe('npm run demo: timings from the logs (scripts/demo/log-lines.ts)', function () {
  it("reads kubectl logs --timestamps: each line's time and text, lines without a time left out", function () {
    const lines = timedLines('2026-12-05T22:48:01.433219875Z waiting for /dev/loop510\n2026-12-05T22:48:03.5Z read /dev/loop510: hello world\nno time here\n')
    expect(lines.map((l) => [l.at.toISOString(), l.text])).to.deep.equal([
      ['2026-12-05T22:48:01.433Z', 'waiting for /dev/loop510'],
      ['2026-12-05T22:48:03.500Z', 'read /dev/loop510: hello world'],
    ])
  })

  it("finds the agent's grants of one device node among its JSON log lines", function () {
    const log = [
      '{"level":"info","time":1796511177000,"msg":"devices updated","granted":["/dev/loop5100 rw"],"revoked":[]}',
      'not json',
      '{"level":"info","time":1796511177103,"msg":"devices updated","granted":["/dev/loop510 rw"],"revoked":[]}',
      '{"level":"info","time":1796511177200,"msg":"ready","granted":["/dev/loop510 rw"]}',
      '{"level":"info","time":1796511177300,"msg":"devices updated","granted":[],"revoked":["/dev/loop510"]}',
    ].join('\n')
    expect(grantsOf(log, '/dev/loop510').map((g) => g.at.getTime())).to.deep.equal([1796511177103])
  })

  it('prints seconds with two decimals', function () {
    expect(secondsBetween(new Date(1000), new Date(1103))).to.equal('0.10 s')
    expect(secondsBetween(new Date(1000), new Date(3456))).to.equal('2.46 s')
  })
})
