import {expect} from 'chai'
import {mkdtemp, readdir, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {Device} from '../../../src/lib/devices/types.js'
import {cdiFileOf, cdiSpecOf} from '../../../src/lib/plugins/class-cdi.js'
import {writeCdiSpecFile} from '../../../src/lib/runtime/cdi-spec.js'
import {cdiValidator} from '../../support/cdi-schema.js'

const tty: Device = {
  devName: 'ttyUSB0',
  devNode: '/dev/ttyUSB0',
  devPath: '/devices/x/ttyUSB0',
  id: 'c188:0',
  kernelName: 'ttyUSB0',
  major: 188,
  minor: 0,
  properties: {},
  subsystem: 'tty',
  type: 'char',
}

describe('CDI spec of a class', function () {
  let dir: string

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-cdi-'))
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('is valid per the CDI JSON schema, one CDI device per class device with its node, type and numbers', async function () {
    const spec = cdiSpecOf('usb-serial', [['ttyUSB0-abc', tty]], 'rw')
    const validate = await cdiValidator()
    expect(validate(spec), JSON.stringify(validate.errors)).to.equal(true)
    expect(spec).to.deep.equal({
      cdiVersion: '0.5.0',
      devices: [{containerEdits: {deviceNodes: [{hostPath: '/dev/ttyUSB0', major: 188, minor: 0, path: '/dev/ttyUSB0', permissions: 'rw', type: 'c'}]}, name: 'ttyUSB0-abc'}],
      kind: 'devices.nfdctl.io/usb-serial',
    })
  })

  it('is written by rename (no temporary file left) and removed when the class has no devices, as CDI requires one', async function () {
    await writeCdiSpecFile(cdiFileOf(dir, 'usb-serial'), cdiSpecOf('usb-serial', [['ttyUSB0-abc', tty]], 'rw'))
    expect(await readdir(dir)).to.deep.equal(['devices.nfdctl.io-usb-serial.json'])
    expect(JSON.parse(await readFile(cdiFileOf(dir, 'usb-serial'), 'utf8'))).to.have.property('kind', 'devices.nfdctl.io/usb-serial')
    await writeCdiSpecFile(cdiFileOf(dir, 'usb-serial'), cdiSpecOf('usb-serial', [], 'rw'))
    expect(await readdir(dir)).to.deep.equal([])
  })
})
