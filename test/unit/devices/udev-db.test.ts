import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {parseUdevDb, readUdevProperties} from '../../../src/lib/devices/udev-db.js'
import {rejection} from '../../support/thrown.js'

/** A record as systemd-udevd writes it for an FTDI USB serial adapter. */
const ftdiRecord = [
  'S:serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0',
  'S:serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0',
  'L:0',
  'I:1733140800123456',
  'E:ID_VENDOR=FTDI',
  'E:ID_VENDOR_ID=0403',
  'E:ID_MODEL_ID=6001',
  'E:ID_SERIAL=FTDI_FT232R_USB_UART_A50285BI',
  'E:ID_USB_INTERFACE_NUM=00',
  'E:ID_FS_LABEL=a=b',
  'G:systemd',
  'G:uaccess',
  'Q:systemd',
  'Q:uaccess',
  'V:1',
  '',
].join('\n')

describe('parseUdevDb', () => {
  it('reads E: properties, S: links and G:/Q: tags', () => {
    const record = parseUdevDb(ftdiRecord)
    expect(record.properties).to.deep.equal({
      ID_FS_LABEL: 'a=b',
      ID_MODEL_ID: '6001',
      ID_SERIAL: 'FTDI_FT232R_USB_UART_A50285BI',
      ID_USB_INTERFACE_NUM: '00',
      ID_VENDOR: 'FTDI',
      ID_VENDOR_ID: '0403',
    })
    expect(record.links).to.deep.equal(['serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0', 'serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0'])
    expect(record.tags).to.deep.equal(['systemd', 'uaccess'])
  })

  it('keeps tags that are only current (Q:) or only historic (G:)', () => {
    expect(parseUdevDb('G:seat\nQ:uaccess\nQ:seat\n').tags).to.deep.equal(['seat', 'uaccess'])
  })

  it('ignores other prefixes, blank lines, malformed lines and E: lines without "="', () => {
    const record = parseUdevDb('W:3\nL:-100\nI:1\nV:1\n\nE\nEX:FOO=1\nE:NOEQUALS\nE:=nokey\nfoo\nE:OK=1\n')
    expect(record).to.deep.equal({links: [], properties: {OK: '1'}, tags: []})
  })

  it('accepts CRLF line ends and keeps empty values', () => {
    expect(parseUdevDb('E:A=1\r\nE:EMPTY=\r\nS:x/y\r\n')).to.deep.equal({links: ['x/y'], properties: {A: '1', EMPTY: ''}, tags: []})
  })

  it('lets a later E: line win over an earlier one', () => {
    expect(parseUdevDb('E:A=1\nE:A=2\n').properties).to.deep.equal({A: '2'})
  })

  it('returns an empty record for empty text', () => {
    expect(parseUdevDb('')).to.deep.equal({links: [], properties: {}, tags: []})
  })
})

describe('readUdevProperties', () => {
  let tmp: string
  let dataDir: string

  beforeEach(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'nfdctl-udev-'))
    dataDir = path.join(tmp, 'run', 'udev', 'data')
    mkdirSync(dataDir, {recursive: true})
    writeFileSync(path.join(dataDir, 'c188:0'), ftdiRecord)
    writeFileSync(path.join(dataDir, 'b8:0'), 'E:ID_TYPE=disk\n')
  })

  afterEach(() => {
    rmSync(tmp, {force: true, recursive: true})
  })

  it('reads the properties of a char and a block device', async () => {
    const tty = await readUdevProperties(dataDir, 'c188:0')
    expect(tty).to.include({ID_MODEL_ID: '6001', ID_VENDOR_ID: '0403'})
    expect(await readUdevProperties(dataDir, 'b8:0')).to.deep.equal({ID_TYPE: 'disk'})
  })

  it('returns undefined when the device has no record', async () => {
    expect(await readUdevProperties(dataDir, 'c188:1')).to.equal(undefined)
    // Same numbers, other type: a different file.
    expect(await readUdevProperties(dataDir, 'b188:0')).to.equal(undefined)
  })

  it('returns undefined when the database directory does not exist (no udevd)', async () => {
    expect(await readUdevProperties(path.join(tmp, 'nope', 'data'), 'c1:3')).to.equal(undefined)
  })

  it('returns undefined when a path component is a file, not a directory', async () => {
    const file = path.join(tmp, 'plain-file')
    writeFileSync(file, '')
    expect(await readUdevProperties(file, 'c1:3')).to.equal(undefined)
  })

  it('rejects ids that are not c<major>:<minor> or b<major>:<minor>', async () => {
    for (const id of ['../../etc/passwd', 'n3', '+usb:1-1', 'c1', 'x1:3', 'c1:3/..', '']) {
      expect((await rejection(readUdevProperties(dataDir, id))).message, id).to.include(`"${id}"`)
    }
  })

  it('fails with the file path when the record exists but cannot be read', async () => {
    mkdirSync(path.join(dataDir, 'c4:1'))
    const error = await rejection(readUdevProperties(dataDir, 'c4:1'))
    expect(error.message).to.include(path.join(dataDir, 'c4:1'))
    expect(error.cause).to.have.property('code', 'EISDIR')
  })
})
