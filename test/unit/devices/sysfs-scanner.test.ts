import {expect} from 'chai'
import {mkdirSync, mkdtempSync, readlinkSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {parseUeventFile, SysfsScanner} from '../../../src/lib/devices/sysfs-scanner.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {rejection} from '../../support/thrown.js'

/** Builds a sysfs-shaped tree; links are written relative, as the kernel shows them, so realpath must do the work. */
class FakeSysfs {
  constructor(readonly root: string) {}

  file(rel: string, content: string): void {
    const file = path.join(this.root, rel)
    mkdirSync(path.dirname(file), {recursive: true})
    writeFileSync(file, content)
  }

  link(rel: string, targetRel: string): void {
    const at = path.join(this.root, rel)
    mkdirSync(path.dirname(at), {recursive: true})
    symlinkSync(path.relative(path.dirname(at), path.join(this.root, targetRel)), at)
  }

  /** A device directory with its uevent file, `subsystem` link and attribute files. */
  device(dir: string, options: {subsystem?: string; uevent?: Record<string, string>; attrs?: Record<string, string>}): void {
    mkdirSync(path.join(this.root, dir), {recursive: true})
    if (options.uevent !== undefined) this.file(`${dir}/uevent`, ueventText(options.uevent))
    if (options.subsystem !== undefined) this.link(`${dir}/subsystem`, options.subsystem)
    for (const [name, value] of Object.entries(options.attrs ?? {})) this.file(`${dir}/${name}`, `${value}\n`)
  }

  /** A device node's directory plus its `/sys/dev/<type>/<maj>:<min>` entry and `dev` attribute. */
  node(type: 'block' | 'char', dir: string, subsystem: string, uevent: Record<string, string>, attrs: Record<string, string> = {}): void {
    const numbers = `${uevent.MAJOR}:${uevent.MINOR}`
    this.device(dir, {attrs: {dev: numbers, ...attrs}, subsystem, uevent})
    this.link(`dev/${type}/${numbers}`, dir)
  }
}

/** The kernel writes MAJOR, MINOR, DEVNAME, DEVTYPE first, then the rest. */
const ueventOrder = ['MAJOR', 'MINOR', 'DEVNAME', 'DEVTYPE']

function ueventText(vars: Record<string, string>): string {
  const rank = (key: string): number => (ueventOrder.includes(key) ? ueventOrder.indexOf(key) : ueventOrder.length)
  return Object.keys(vars)
    .sort((a, b) => rank(a) - rank(b))
    .map((key) => `${key}=${vars[key]}\n`)
    .join('')
}

const usbDevice = 'devices/pci0000:00/0000:00:14.0/usb1/1-1'
const usbInterface = `${usbDevice}/1-1:1.0`
const ttyUsb = `${usbInterface}/ttyUSB0/tty/ttyUSB0`
const scsiDevice = 'devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0'
const disk = `${scsiDevice}/block/sda`

/** A small machine: memory devices, virtual consoles, tun, an FTDI USB serial adapter, a SATA disk, and broken entries. */
function buildMachine(sys: FakeSysfs): void {
  for (const dir of ['class/mem', 'class/tty', 'class/misc', 'class/block', 'bus/usb', 'bus/usb-serial', 'bus/pci']) {
    mkdirSync(path.join(sys.root, dir), {recursive: true})
  }

  sys.node('char', 'devices/virtual/mem/null', 'class/mem', {DEVMODE: '0666', DEVNAME: 'null', MAJOR: '1', MINOR: '3'})
  sys.node('char', 'devices/virtual/mem/zero', 'class/mem', {DEVMODE: '0666', DEVNAME: 'zero', MAJOR: '1', MINOR: '5'})
  sys.node('char', 'devices/virtual/tty/tty7', 'class/tty', {DEVNAME: 'tty7', MAJOR: '4', MINOR: '7'})
  sys.node('char', 'devices/virtual/tty/tty64', 'class/tty', {DEVNAME: 'tty64', MAJOR: '4', MINOR: '64'})
  sys.node('char', 'devices/virtual/misc/tun', 'class/misc', {DEVMODE: '0666', DEVNAME: 'net/tun', MAJOR: '10', MINOR: '200'})

  sys.device('devices/pci0000:00/0000:00:14.0', {
    attrs: {device: '0xa36d', modalias: 'pci:v00008086d0000A36Dsv00001028sd0000085Bbc0Csc03i30', vendor: '0x8086'},
    subsystem: 'bus/pci',
  })
  sys.node(
    'char',
    usbDevice,
    'bus/usb',
    {BUSNUM: '001', DEVNAME: 'bus/usb/001/002', DEVNUM: '002', DEVTYPE: 'usb_device', MAJOR: '189', MINOR: '1', PRODUCT: '403/6001/600', TYPE: '0/0/0'},
    {authorized: '1', idProduct: '6001', idVendor: '0403', manufacturer: 'FTDI', product: 'FT232R USB UART', serial: 'A50285BI'},
  )
  sys.device(usbInterface, {
    attrs: {bInterfaceNumber: '00', modalias: 'usb:v0403p6001d0600dc00dsc00dp00icFFiscFFipFFin00'},
    subsystem: 'bus/usb',
    uevent: {DEVTYPE: 'usb_interface', INTERFACE: '255/255/255', PRODUCT: '403/6001/600'},
  })
  sys.device(`${usbInterface}/ttyUSB0`, {attrs: {port_number: '0'}, subsystem: 'bus/usb-serial', uevent: {}})
  sys.node('char', ttyUsb, 'class/tty', {DEVMODE: '0660', DEVNAME: 'ttyUSB0', MAJOR: '188', MINOR: '0'})

  sys.device(scsiDevice, {attrs: {model: 'Samsung SSD 860 ', vendor: 'ATA     '}, uevent: {DEVTYPE: 'scsi_device'}})
  sys.node('block', disk, 'class/block', {DEVNAME: 'sda', DEVTYPE: 'disk', DISKSEQ: '1', MAJOR: '8', MINOR: '0'}, {ro: '0', size: '1953525168'})
  sys.node('block', `${disk}/sda1`, 'class/block', {DEVNAME: 'sda1', DEVTYPE: 'partition', MAJOR: '8', MINOR: '1', PARTN: '1'}, {partition: '1', size: '2048'})

  // Entries the scan must skip.
  sys.node('char', 'devices/virtual/misc/nonode', 'class/misc', {MAJOR: '10', MINOR: '99'})
  sys.link('dev/char/189:9', 'devices/pci0000:00/0000:00:14.0/usb1/1-9')
  sys.device('devices/virtual/misc/nouevent', {subsystem: 'class/misc'})
  sys.link('dev/char/10:98', 'devices/virtual/misc/nouevent')
  sys.device('devices/virtual/misc/reused', {subsystem: 'class/misc', uevent: {DEVNAME: 'reused', MAJOR: '10', MINOR: '96'}})
  sys.link('dev/char/10:97', 'devices/virtual/misc/reused')
  sys.device('class/misc/escape', {subsystem: 'class/misc', uevent: {DEVNAME: 'escape', MAJOR: '10', MINOR: '95'}})
  sys.link('dev/char/10:95', 'class/misc/escape')
  sys.device('devices/virtual/misc/nosubsystem', {uevent: {DEVNAME: 'nosubsystem', MAJOR: '10', MINOR: '94'}})
  sys.link('dev/char/10:94', 'devices/virtual/misc/nosubsystem')
  sys.link('dev/char/not-a-device', 'devices/virtual/mem/null')
}

/** What udevd would have written for the USB serial adapter and the disk. */
function buildUdevDb(dataDir: string): void {
  mkdirSync(dataDir, {recursive: true})
  writeFileSync(
    path.join(dataDir, 'c188:0'),
    [
      'S:serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0',
      'I:1733140800123456',
      'E:ID_VENDOR_ID=0403',
      'E:ID_MODEL_ID=6001',
      'E:ID_SERIAL=FTDI_FT232R_USB_UART_A50285BI',
      'E:DEVMODE=0666',
      'G:systemd',
      'Q:systemd',
      'V:1',
      '',
    ].join('\n'),
  )
  writeFileSync(path.join(dataDir, 'b8:0'), 'E:ID_TYPE=disk\nE:ID_SERIAL=Samsung_SSD_860_S3Z9NB0K\n')
}

describe('parseUeventFile', () => {
  it('reads KEY=VALUE lines, splitting at the first "="', () => {
    expect(parseUeventFile('MAJOR=1\nMINOR=3\nDEVNAME=null\nDEVMODE=0666\nMODALIAS=a=b\n')).to.deep.equal({
      DEVMODE: '0666',
      DEVNAME: 'null',
      MAJOR: '1',
      MINOR: '3',
      MODALIAS: 'a=b',
    })
  })

  it('ignores blank and malformed lines and keeps empty values', () => {
    expect(parseUeventFile('\nnoequals\n=novalue\nEMPTY=\n')).to.deep.equal({EMPTY: ''})
    expect(parseUeventFile('')).to.deep.equal({})
  })
})

describe('SysfsScanner on a fake sysfs tree', () => {
  let tmp: string
  let sys: FakeSysfs
  let udevDataDir: string
  let scanner: SysfsScanner

  beforeEach(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'nfdctl-sysfs-'))
    sys = new FakeSysfs(path.join(tmp, 'sys'))
    buildMachine(sys)
    udevDataDir = path.join(tmp, 'run', 'udev', 'data')
    buildUdevDb(udevDataDir)
    scanner = new SysfsScanner({sysRoot: sys.root, udevDataDir})
  })

  afterEach(() => {
    rmSync(tmp, {force: true, recursive: true})
  })

  it('lays links out as the kernel does (sanity check of the fixture)', () => {
    expect(readlinkSync(path.join(sys.root, 'dev/char/1:3'))).to.equal('../../devices/virtual/mem/null')
    expect(readlinkSync(path.join(sys.root, 'devices/virtual/mem/null/subsystem'))).to.equal('../../../../class/mem')
  })

  describe('scanAll', () => {
    it('finds every device with a node, sorted by type, then major and minor numerically', async () => {
      const ids = (await scanner.scanAll()).map((device) => device.id)
      expect(ids).to.deep.equal(['b8:0', 'b8:1', 'c1:3', 'c1:5', 'c4:7', 'c4:64', 'c10:200', 'c188:0', 'c189:1'])
    })

    it('describes /dev/null from its uevent file and links', async () => {
      const devices = await scanner.scanAll()
      expect(devices.find((device) => device.id === 'c1:3')).to.deep.equal({
        devName: 'null',
        devNode: '/dev/null',
        devPath: '/devices/virtual/mem/null',
        id: 'c1:3',
        kernelName: 'null',
        major: 1,
        minor: 3,
        properties: {DEVMODE: '0666', DEVNAME: 'null', MAJOR: '1', MINOR: '3'},
        subsystem: 'mem',
        type: 'char',
      })
    })

    it('overlays udev properties on the uevent variables of a USB serial tty', async () => {
      const tty = (await scanner.scanAll()).find((device) => device.devName === 'ttyUSB0')
      expect(tty).to.deep.equal({
        devName: 'ttyUSB0',
        devNode: '/dev/ttyUSB0',
        devPath: '/' + ttyUsb,
        id: 'c188:0',
        kernelName: 'ttyUSB0',
        major: 188,
        minor: 0,
        properties: {
          // udev wins where both say something.
          DEVMODE: '0666',
          DEVNAME: 'ttyUSB0',
          ID_MODEL_ID: '6001',
          ID_SERIAL: 'FTDI_FT232R_USB_UART_A50285BI',
          ID_VENDOR_ID: '0403',
          MAJOR: '188',
          MINOR: '0',
        },
        subsystem: 'tty',
        type: 'char',
      })
      expect(tty).not.to.have.property('devType')
    })

    it('keeps DEVTYPE and subdirectory names for a USB device, a disk and its partition', async () => {
      const byId = new Map((await scanner.scanAll()).map((device) => [device.id, device]))
      expect(byId.get('c189:1')).to.include({devName: 'bus/usb/001/002', devNode: '/dev/bus/usb/001/002', devType: 'usb_device', kernelName: '1-1', subsystem: 'usb'})
      expect(byId.get('c10:200')).to.include({devNode: '/dev/net/tun', kernelName: 'tun', subsystem: 'misc'})
      expect(byId.get('b8:0')).to.include({devPath: '/' + disk, devType: 'disk', kernelName: 'sda', subsystem: 'block', type: 'block'})
      expect(byId.get('b8:0')?.properties).to.include({DISKSEQ: '1', ID_TYPE: 'disk'})
      expect(byId.get('b8:1')).to.include({devPath: `/${disk}/sda1`, devType: 'partition', kernelName: 'sda1', subsystem: 'block'})
      expect(byId.get('b8:1')?.properties).to.deep.equal({DEVNAME: 'sda1', DEVTYPE: 'partition', MAJOR: '8', MINOR: '1', PARTN: '1'})
    })

    it('skips entries without DEVNAME, dangling links, missing uevent or subsystem, reused entries and links out of devices/', async () => {
      const ids = new Set((await scanner.scanAll()).map((device) => device.id))
      for (const skipped of ['c10:99', 'c189:9', 'c10:98', 'c10:97', 'c10:96', 'c10:95', 'c10:94']) expect(ids.has(skipped), skipped).to.equal(false)
    })

    it('uses the uevent variables alone when there is no udev database', async () => {
      const bare = new SysfsScanner({sysRoot: sys.root, udevDataDir: path.join(tmp, 'no-udev')})
      const tty = (await bare.scanAll()).find((device) => device.id === 'c188:0')
      expect(tty?.properties).to.deep.equal({DEVMODE: '0660', DEVNAME: 'ttyUSB0', MAJOR: '188', MINOR: '0'})
    })

    it('ignores an unreadable udev record instead of losing the device', async () => {
      mkdirSync(path.join(udevDataDir, 'c1:3'))
      const devNull = (await scanner.scanAll()).find((device) => device.id === 'c1:3')
      expect(devNull?.properties).to.deep.equal({DEVMODE: '0666', DEVNAME: 'null', MAJOR: '1', MINOR: '3'})
    })

    it('reports devPath relative to sysfs even when the root is reached through a symlink', async () => {
      const alias = path.join(tmp, 'sys-alias')
      symlinkSync(sys.root, alias)
      const devices = await new SysfsScanner({sysRoot: alias, udevDataDir}).scanAll()
      expect(devices.find((device) => device.id === 'c1:3')?.devPath).to.equal('/devices/virtual/mem/null')
      expect(devices).to.have.length(9)
    })

    it('fails with the path when the sysfs root or its dev/ listing is missing', async () => {
      const missing = path.join(tmp, 'nope')
      expect((await rejection(new SysfsScanner({sysRoot: missing}).scanAll())).message).to.include(missing)
      rmSync(path.join(sys.root, 'dev', 'block'), {recursive: true})
      expect((await rejection(scanner.scanAll())).message).to.include(path.join(sys.root, 'dev', 'block'))
    })

    it('survives devices disappearing while it scans', async () => {
      for (let minor = 0; minor < 400; minor++) {
        sys.node('char', `devices/virtual/hot/hot${minor}`, 'class/misc', {DEVNAME: `hot${minor}`, MAJOR: '240', MINOR: String(minor)})
      }

      const removals = Array.from({length: 200}, (_, i) => rm(path.join(sys.root, `devices/virtual/hot/hot${i * 2}`), {force: true, recursive: true}))
      const [devices] = await Promise.all([scanner.scanAll(), ...removals])
      const hot = devices.filter((device) => device.major === 240)
      expect(hot.length).to.be.within(200, 400)
      for (const device of hot) expect(device.minor % 2 === 1 || device.devName === `hot${device.minor}`).to.equal(true)
      expect(hot.filter((device) => device.minor % 2 === 1)).to.have.length(200)
    })

    // Building the tree is the slow part (about 2 ms per device on overlayfs), so a thousand stands in for thousands.
    it('scans many more devices than it reads at once', async () => {
      for (let minor = 0; minor < 1000; minor++) {
        sys.node('char', `devices/virtual/many/m${minor}`, 'class/misc', {DEVNAME: `m${minor}`, MAJOR: '241', MINOR: String(minor)})
      }

      const many = (await scanner.scanAll()).filter((device) => device.major === 241)
      expect(many.map((device) => device.minor)).to.deep.equal(Array.from({length: 1000}, (_, i) => i))
    })
  })

  describe('scanOne', () => {
    it('returns the same device scanAll finds', async () => {
      const all = await scanner.scanAll()
      for (const [type, major, minor] of [
        ['char', 1, 3],
        ['char', 188, 0],
        ['block', 8, 1],
      ] as const) {
        expect(await scanner.scanOne(type, major, minor)).to.deep.equal(all.find((d) => d.type === type && d.major === major && d.minor === minor))
      }
    })

    it('returns undefined for numbers the kernel does not have, or that have no usable entry', async () => {
      expect(await scanner.scanOne('char', 42, 42)).to.equal(undefined)
      expect(await scanner.scanOne('block', 1, 3)).to.equal(undefined)
      expect(await scanner.scanOne('char', 10, 99)).to.equal(undefined)
      expect(await scanner.scanOne('char', 189, 9)).to.equal(undefined)
    })

    it('returns undefined for numbers that cannot be device numbers', async () => {
      for (const [major, minor] of [
        [-1, 3],
        [1.5, 3],
        [1, Number.NaN],
        [1, Number.POSITIVE_INFINITY],
      ]) {
        expect(await scanner.scanOne('char', major, minor), `${major}:${minor}`).to.equal(undefined)
      }
    })
  })

  describe('readAttribute', () => {
    let byId: Map<string, Device>

    beforeEach(async () => {
      byId = new Map((await scanner.scanAll()).map((device) => [device.id, device]))
    })

    function device(id: string): Device {
      const found = byId.get(id)
      if (found === undefined) throw new Error(`fixture has no device ${id}`)
      return found
    }

    it("reads the device's own attribute without the trailing newline", () => {
      expect(scanner.readAttribute(device('c1:3'), 'dev')).to.equal('1:3')
      expect(scanner.readAttribute(device('b8:1'), 'size')).to.equal('2048')
      expect(scanner.readAttribute(device('c1:3'), 'uevent')).to.equal('MAJOR=1\nMINOR=3\nDEVNAME=null\nDEVMODE=0666')
    })

    it('walks up to the nearest parent that has the attribute', () => {
      const tty = device('c188:0')
      expect(scanner.readAttribute(tty, 'idVendor')).to.equal('0403')
      expect(scanner.readAttribute(tty, 'idProduct')).to.equal('6001')
      expect(scanner.readAttribute(tty, 'port_number')).to.equal('0')
      expect(scanner.readAttribute(tty, 'vendor')).to.equal('0x8086')
      // Both the interface and the PCI controller have one; the interface is nearer.
      expect(scanner.readAttribute(tty, 'modalias')).to.equal('usb:v0403p6001d0600dc00dsc00dp00icFFiscFFipFFin00')
      expect(scanner.readAttribute(device('b8:1'), 'model')).to.equal('Samsung SSD 860 ')
      expect(scanner.readAttribute(device('b8:1'), 'ro')).to.equal('0')
    })

    it('returns undefined when no directory up to devices/ has it', () => {
      expect(scanner.readAttribute(device('c188:0'), 'idSerial')).to.equal(undefined)
      expect(scanner.readAttribute(device('c1:3'), 'idVendor')).to.equal(undefined)
    })

    it('looks in devices/ itself but never in the sysfs root or above', () => {
      sys.file('devices/toplevel', 'x\n')
      sys.file('secret', 'root\n')
      writeFileSync(path.join(tmp, 'above'), 'above\n')
      expect(scanner.readAttribute(device('c1:3'), 'toplevel')).to.equal('x')
      expect(scanner.readAttribute(device('c1:3'), 'secret')).to.equal(undefined)
      expect(scanner.readAttribute(device('c1:3'), 'above')).to.equal(undefined)
    })

    it('rejects names that are paths', () => {
      for (const name of ['../uevent', 'subsystem/uevent', '..', '.', '', 'a..b', '/etc/passwd', 'dev\0']) {
        expect(scanner.readAttribute(device('c1:3'), name), JSON.stringify(name)).to.equal(undefined)
      }
    })

    it('does not follow symlinks or read directories', () => {
      sys.link('devices/virtual/mem/null/evil', 'secret')
      sys.file('secret', 'root\n')
      expect(scanner.readAttribute(device('c1:3'), 'evil')).to.equal(undefined)
      expect(scanner.readAttribute(device('c1:3'), 'subsystem')).to.equal(undefined)
      mkdirSync(path.join(sys.root, `${ttyUsb}/idVendor`))
      // A directory of that name is not the attribute; the walk goes on to the USB device.
      expect(scanner.readAttribute(device('c188:0'), 'idVendor')).to.equal('0403')
    })

    it('refuses a devPath that leaves devices/', () => {
      const escaped: Device = {...device('c1:3'), devPath: '/devices/../class/mem'}
      sys.file('class/mem/leak', 'x\n')
      expect(scanner.readAttribute(escaped, 'leak')).to.equal(undefined)
      expect(scanner.readAttribute({...device('c1:3'), devPath: '/'}, 'secret')).to.equal(undefined)
    })

    it('sees changes at once (no cache)', () => {
      const sda = device('b8:0')
      expect(scanner.readAttribute(sda, 'size')).to.equal('1953525168')
      sys.file(`${disk}/size`, '0\n')
      expect(scanner.readAttribute(sda, 'size')).to.equal('0')
      rmSync(path.join(sys.root, `${disk}/size`))
      expect(scanner.readAttribute(sda, 'size')).to.equal(undefined)
    })

    it('works detached from the scanner (it is a field, not a method)', () => {
      const {readAttribute} = scanner
      expect(readAttribute(device('c1:3'), 'dev')).to.equal('1:3')
    })
  })
})
