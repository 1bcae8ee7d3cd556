import {expect} from 'chai'
import {mkdtemp, readdir, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {stableDeviceId} from '../../../src/lib/devices/device-identity.js'
import type {Device} from '../../../src/lib/devices/types.js'
import {claimCdiFile, claimCdiId, claimCdiKind, claimCdiSpec, claimMarkerPath, parseClaimMarker, removeClaimCdi, writeClaimCdi} from '../../../src/lib/dra/claim-cdi.js'
import type {PreparedDevice} from '../../../src/lib/dra/prepared-claims.js'
import {draDeviceName} from '../../../src/lib/dra/resource-slices.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'
import {cdiValidator} from '../../support/cdi-schema.js'

const tty: Device = {
  devName: 'ttyUSB0',
  devNode: '/dev/ttyUSB0',
  devPath: '/devices/x/ttyUSB0',
  id: 'c188:0',
  kernelName: 'ttyUSB0',
  major: 188,
  minor: 0,
  properties: {ID_SERIAL: 'FTDI_A10'},
  subsystem: 'tty',
  type: 'char',
}

const uid = '3f1c9a2e-7b4d-4e0a-9c51-0d2b6f8e1a77'

function preparedOf(device: Device, access: string, className = 'serial'): {prepared: PreparedDevice; device: Device} {
  const name = draDeviceName(stableDeviceId(device))
  return {device, prepared: {access, cdiId: claimCdiId(uid, name), className, device: name, request: 'req', stableId: stableDeviceId(device)}}
}

// The CDI parser's rules (container-device-interface pkg/parser): vendor and class begin with a letter, the
// device name with a letter or digit; all three end with a letter or digit.
const cdiVendor = /^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/
const cdiClass = /^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/
const cdiDeviceName = /^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$/

describe('claimCdiSpec', function () {
  const devices = [preparedOf(tty, 'rw'), preparedOf(loop(3), 'r', 'disks')]
  const [ttyName, loopName] = devices.map((d) => d.prepared.device)

  it('is valid per the CDI JSON schema', async function () {
    const validate = await cdiValidator()
    const spec = claimCdiSpec(uid, devices)
    expect(validate(spec), JSON.stringify(validate.errors)).to.equal(true)
  })

  it('a device awaited (unplugged, its request tolerates it) is its marker only, as the null device, so that a container starts without it and is known to hold it; still valid CDI', async function () {
    const [present, away] = devices
    const spec = claimCdiSpec(uid, [present], [away.prepared])
    expect(spec.devices.map((d) => d.name)).to.deep.equal([`${uid}-${ttyName}`, `${uid}-${loopName}`])
    expect(spec.devices[1].containerEdits).to.deep.equal({deviceNodes: [{hostPath: '/dev/null', major: 1, minor: 3, path: `/dev/nfdctl/claims/${uid}/${loopName}`, permissions: 'rw', type: 'c'}]})
    expect(parseClaimMarker(spec.devices[1].containerEdits.deviceNodes![0].path)).to.deep.equal({claimUid: uid, device: loopName})
    const validate = await cdiValidator()
    expect(validate(spec), JSON.stringify(validate.errors)).to.equal(true)
  })

  it('one CDI device per claim device, named <claim uid>-<device>, with its node at the kernel path and the marker node, its type, numbers and access', function () {
    const tty0 = {hostPath: '/dev/ttyUSB0', major: 188, minor: 0, permissions: 'rw', type: 'c'}
    const loop3 = {hostPath: '/dev/loop3', major: 7, minor: 3, permissions: 'r', type: 'b'}
    expect(claimCdiSpec(uid, devices)).to.deep.equal({
      cdiVersion: '0.5.0',
      devices: [
        {
          containerEdits: {
            deviceNodes: [
              {...tty0, path: '/dev/ttyUSB0'},
              {...tty0, path: `/dev/nfdctl/claims/${uid}/${ttyName}`},
            ],
          },
          name: `${uid}-${ttyName}`,
        },
        {
          containerEdits: {
            deviceNodes: [
              {...loop3, path: '/dev/loop3'},
              {...loop3, path: `/dev/nfdctl/claims/${uid}/${loopName}`},
            ],
          },
          name: `${uid}-${loopName}`,
        },
      ],
      kind: 'dra.devices.nfdctl.io/claim',
    })
  })

  it('its kind and device names are what the CDI parser accepts, and kind=name is the ID kubelet hands the runtime', function () {
    const spec = claimCdiSpec(uid, devices)
    const [vendor, cdiClassName, ...rest] = spec.kind.split('/')
    expect(rest).to.deep.equal([])
    expect(vendor).to.match(cdiVendor)
    expect(cdiClassName).to.match(cdiClass)
    for (const [i, device] of spec.devices.entries()) {
      expect(device.name).to.match(cdiDeviceName)
      expect(`${spec.kind}=${device.name}`).to.equal(devices[i].prepared.cdiId)
    }
  })

  it("follows the device's kernel name: a device re-plugged under another node path is given at that path", function () {
    const moved = {...tty, devName: 'ttyUSB4', devNode: '/dev/ttyUSB4', id: 'c188:4', minor: 4}
    const spec = claimCdiSpec(uid, [{device: moved, prepared: devices[0].prepared}])
    expect(spec.devices[0].name).to.equal(`${uid}-${ttyName}`)
    expect(spec.devices[0].containerEdits.deviceNodes.map((n) => [n.path, n.hostPath, n.minor])).to.deep.equal([
      ['/dev/ttyUSB4', '/dev/ttyUSB4', 4],
      [`/dev/nfdctl/claims/${uid}/${ttyName}`, '/dev/ttyUSB4', 4],
    ])
  })

  it('two claims never share a CDI device name for the same device', function () {
    const other = claimCdiSpec('0a0a0a0a-0000-4000-8000-000000000000', [devices[0]])
    expect(other.devices[0].name).to.not.equal(claimCdiSpec(uid, [devices[0]]).devices[0].name)
  })
})

describe('claim marker paths', function () {
  it('read back as the claim and device they name, and nothing else does', function () {
    for (const device of ['a', 'a-b', 'x'.repeat(63), 'ttyusb0-0123456789ab']) {
      expect(parseClaimMarker(claimMarkerPath(uid, device)), device).to.deep.equal({claimUid: uid, device})
    }
    const others = [
      '/dev/loop3',
      `/dev/nfdctl/claims/${uid}`,
      `/dev/nfdctl/claims/${uid}/a/b`,
      `/dev/nfdctl/claims/../${uid}/a`,
      `/dev/nfdctl/claims/${uid}/A`,
      `/dev/nfdctl/claims/${uid}/-a`,
      `/x/dev/nfdctl/claims/${uid}/a`,
    ]
    for (const path of others) expect(parseClaimMarker(path), path).to.equal(undefined)
  })
})

describe('writeClaimCdi and removeClaimCdi', function () {
  let dir: string

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-claim-cdi-'))
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('one file per claim, in a directory made if missing; removing it twice is no error', async function () {
    const cdiDir = join(dir, 'cdi')
    const spec = claimCdiSpec(uid, [preparedOf(tty, 'rw')])
    await writeClaimCdi(cdiDir, uid, spec)
    await writeClaimCdi(cdiDir, 'other-claim', claimCdiSpec('other-claim', [preparedOf(loop(1), 'r')]))
    expect((await readdir(cdiDir)).sort()).to.deep.equal([`dra.devices.nfdctl.io-claim-${uid}.json`, 'dra.devices.nfdctl.io-claim-other-claim.json'])
    expect(JSON.parse(await readFile(claimCdiFile(cdiDir, uid), 'utf8'))).to.deep.equal(spec)
    expect(spec.kind).to.equal(claimCdiKind)
    await removeClaimCdi(cdiDir, uid)
    await removeClaimCdi(cdiDir, uid)
    expect(await readdir(cdiDir)).to.deep.equal(['dra.devices.nfdctl.io-claim-other-claim.json'])
  })
})
