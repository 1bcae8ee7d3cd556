import {expect} from 'chai'
import {mkdtemp, readdir, readFile, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {decodeClaims, encodeClaims, PreparedClaims, type PreparedClaim} from '../../../src/lib/dra/prepared-claims.js'
import {rejection} from '../../support/thrown.js'

const claim = (uid: string, devices = 1): PreparedClaim => ({
  devices: Array.from({length: devices}, (_, i) => ({
    access: i === 0 ? 'rw' : 'r',
    adminAccess: i === 1 ? true : undefined,
    cdiId: `dra.devices.nfdctl.io/claim=${uid}-dev-${i}`,
    className: 'disks',
    device: `dev-${i}`,
    request: i === 0 ? 'req' : 'any/small',
    stableId: `Dev_${i}-0123456789ab`,
  })),
  name: `claim-${uid}`,
  namespace: 'lab',
  pods: ['pod-1', 'pod-2'],
  uid,
})

/** What JSON keeps of a claim: undefined fields are not written. */
const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

describe('encodeClaims and decodeClaims', function () {
  it('round trip, in UID order, whatever order the claims came in', function () {
    const claims = [claim('u3', 2), claim('u1', 0), claim('u2', 1)]
    const decoded = decodeClaims(encodeClaims(claims))
    expect(decoded.map((c) => c.uid)).to.deep.equal(['u1', 'u2', 'u3'])
    expect(decoded).to.deep.equal(asJson([claims[1], claims[2], claims[0]]))
    expect(encodeClaims([])).to.equal('{"claims":[],"version":1}\n')
    expect(decodeClaims(encodeClaims([]))).to.deep.equal([])
  })

  it('refuses a record of another version or shape, whole', function () {
    const good = JSON.parse(encodeClaims([claim('u1')])) as {claims: unknown[]; version: number}
    for (const text of [
      JSON.stringify({...good, version: 2}),
      JSON.stringify({...good, version: '1'}),
      JSON.stringify({claims: good.claims}),
      JSON.stringify({claims: {}, version: 1}),
      JSON.stringify({version: 1}),
      JSON.stringify([good]),
    ]) {
      expect(() => decodeClaims(text), text).to.throw('not a version 1 record of prepared claims')
    }
    expect(() => decodeClaims('{"claims": [')).to.throw(SyntaxError)
    expect(() => decodeClaims('null')).to.throw()
  })

  it('refuses a record with a claim lacking its uid, namespace, name, devices or pods, or a device lacking what identifies it', function () {
    const whole = claim('u1', 2)
    const broken: unknown[] = [
      null,
      'u1',
      {...whole, uid: undefined},
      {...whole, uid: 7},
      {...whole, namespace: undefined},
      {...whole, name: undefined},
      {...whole, devices: undefined},
      {...whole, devices: {}},
      {...whole, pods: undefined},
      {...whole, devices: [null]},
      ...(['device', 'stableId', 'className', 'cdiId'] as const).map((field) => ({...whole, devices: [whole.devices[0], {...whole.devices[1], [field]: undefined}]})),
    ]
    for (const bad of broken) {
      const text = JSON.stringify({claims: [claim('u0'), bad], version: 1})
      expect(() => decodeClaims(text), JSON.stringify(bad)).to.throw('a prepared claim in the record lacks its uid, name, devices or pods')
    }
  })
})

describe('PreparedClaims', function () {
  let dir: string

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-claims-'))
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('a missing record is an empty one', async function () {
    const claims = new PreparedClaims(join(dir, 'none'))
    await claims.load()
    expect(claims.all()).to.deep.equal([])
    expect(claims.get('u1')).to.equal(undefined)
  })

  it('set and delete reach the file before they resolve; another instance loads what is left', async function () {
    const stateDir = join(dir, 'state', 'agent')
    const claims = new PreparedClaims(stateDir)
    await claims.set(claim('u1'))
    await claims.set(claim('u2', 2))
    expect(decodeClaims(await readFile(claims.file, 'utf8')).map((c) => c.uid)).to.deep.equal(['u1', 'u2'])
    await claims.set({...claim('u1'), pods: ['pod-9']})
    await claims.delete('u2')
    expect(claims.get('u2')).to.equal(undefined)

    const restarted = new PreparedClaims(stateDir)
    await restarted.load()
    expect(restarted.all()).to.deep.equal(asJson([{...claim('u1'), pods: ['pod-9']}]))
    expect(restarted.get('u1')?.pods).to.deep.equal(['pod-9'])
    expect(restarted.file).to.equal(join(stateDir, 'dra-claims.json'))
  })

  it('the record is readable by its owner only (mode 0600), and no temporary file is left', async function () {
    const claims = new PreparedClaims(dir)
    await claims.set(claim('u1'))
    expect((await stat(claims.file)).mode & 0o777).to.equal(0o600)
    await claims.delete('u1')
    expect((await stat(claims.file)).mode & 0o777).to.equal(0o600)
    expect(await readdir(dir)).to.deep.equal(['dra-claims.json'])
  })

  it('deleting a claim it does not hold writes nothing', async function () {
    const claims = new PreparedClaims(dir)
    await claims.delete('u1')
    expect(await readdir(dir)).to.deep.equal([])
  })

  it('many writes at once: the file ends with all of them', async function () {
    const claims = new PreparedClaims(dir)
    await Promise.all(Array.from({length: 20}, (_, i) => claims.set(claim(`u${String(i).padStart(2, '0')}`))))
    const restarted = new PreparedClaims(dir)
    await restarted.load()
    expect(restarted.all().map((c) => c.uid)).to.deep.equal(Array.from({length: 20}, (_, i) => `u${String(i).padStart(2, '0')}`))
  })

  it('a damaged record is an error, not an empty record', async function () {
    const claims = new PreparedClaims(dir)
    await writeFile(claims.file, '{"version": 1, "claims": [{"uid": "u1"}]}\n')
    const error = await rejection(claims.load())
    expect(error.message).to.include('lacks its uid, name, devices or pods')
    await writeFile(claims.file, '{"vers')
    await rejection(claims.load(), SyntaxError)
  })
})
