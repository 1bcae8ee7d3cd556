import {expect} from 'chai'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {decodeOwned, deviceOfNumber, encodeOwned, identityDigest, numbersWithAnotherDevice, ownedBy, OwnedDevices} from '../../../src/lib/devices/owned-devices.js'
import {loopDevice as loop} from '../../../harness/devices/loop-device.js'

describe("OwnedDevices: every number that was a class device's on this node", function () {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-owned-'))
  })
  afterEach(async () => {
    await rm(dir, {force: true, recursive: true})
  })

  it('round-trips in number order; a device known only by its number can be taken back (id, type, node)', function () {
    const text = encodeOwned([
      {devNode: '/dev/loop10', major: 7, minor: 10, type: 'b'},
      {devNode: '/dev/ttyUSB0', major: 188, minor: 0, type: 'c'},
      {devNode: '/dev/loop2', major: 7, minor: 2, type: 'b'},
    ])
    expect(decodeOwned(text).map((d) => d.devNode)).to.deep.equal(['/dev/loop2', '/dev/loop10', '/dev/ttyUSB0'])
    expect(deviceOfNumber({devNode: '/dev/ttyUSB0', major: 188, minor: 0, type: 'c'})).to.include({devName: 'ttyUSB0', id: 'c188:0', type: 'char'})
  })

  for (const [name, text, message] of [
    ['another version', '{"version": 2, "devices": []}', 'version must be 1, got 2'],
    ['a node outside /dev', '{"version": 1, "devices": [{"type": "c", "major": 1, "minor": 1, "devNode": "/dev/../etc/passwd"}]}', 'devices[0].devNode must be a path below /dev/'],
    ['a number out of range', '{"version": 1, "devices": [{"type": "c", "major": 4096, "minor": 1, "devNode": "/dev/x"}]}', 'devices[0].major must be 0-4095, got 4096'],
  ] as const) {
    it(`refuses ${name}, saying what is wrong`, () => expect(() => decodeOwned(text)).to.throw(message))
  }

  it('is on disk when add() resolves, a new record reads it back, and a number already owned changes nothing', async function () {
    const owned = new OwnedDevices({stateDir: join(dir, 'state')})
    expect(await owned.load()).to.equal(undefined)
    const writes = [owned.add(loop(1), ['low']), owned.add(loop(2), ['low']), owned.add(loop(1), ['low'])]
    await Promise.all(writes)
    const again = new OwnedDevices({stateDir: join(dir, 'state')})
    expect(await again.load()).to.equal(undefined)
    expect(again.devices().map((d) => d.id)).to.deep.equal(['b7:1', 'b7:2'])
    const before = await readFile(again.file, 'utf8')
    await again.add(loop(2), ['low'])
    await again.add(loop(2), [])
    await again.saved()
    expect(await readFile(again.file, 'utf8')).to.equal(before)
  })

  it('saved() waits for a write in flight, and rejects while the file cannot be written; the next write has everything', async function () {
    await writeFile(join(dir, 'blocked'), 'a file where the directory should be')
    const owned = new OwnedDevices({stateDir: join(dir, 'blocked')})
    const first = owned.add(loop(3), ['low'])
    let failure: unknown
    await owned.saved().catch((error: unknown) => {
      failure = error
    })
    await first.catch(() => {})
    expect(String(failure)).to.match(/EEXIST|ENOTDIR/)
    await rm(join(dir, 'blocked'))
    await owned.saved()
    expect(decodeOwned(await readFile(owned.file, 'utf8')).map((d) => d.minor)).to.deep.equal([3])
  })

  it("keeps the classes each number was a device of; a record without them is any class's", function () {
    const text = encodeOwned([{classes: ['b', 'a'], devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'}])
    expect(JSON.parse(text)).to.deep.equal({devices: [{classes: ['a', 'b'], devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'}], version: 1})
    const [kept, legacy] = decodeOwned(
      '{"version": 1, "devices": [{"type": "b", "major": 7, "minor": 1, "devNode": "/dev/loop1", "classes": ["a"]}, {"type": "c", "major": 1, "minor": 3, "devNode": "/dev/null"}]}',
    )
    expect(kept.classes).to.deep.equal(['a'])
    expect(legacy.classes).to.equal(undefined)
    expect(ownedBy(kept, new Set(['a', 'z']))).to.equal(true)
    expect(ownedBy(kept, new Set(['z']))).to.equal(false)
    expect(ownedBy(legacy, new Set(['z']))).to.equal(true)
    expect(ownedBy(legacy, new Set())).to.equal(false)
    expect(() => decodeOwned('{"version": 1, "devices": [{"type": "c", "major": 1, "minor": 3, "devNode": "/dev/null", "classes": "a"}]}')).to.throw('devices[0].classes must be a list of class names')
  })

  it('adds the classes a number joins, forgets what it is told to, and each change moves the generation', async function () {
    const owned = new OwnedDevices({stateDir: dir})
    await owned.add(loop(1), ['a'])
    await owned.add(loop(1), ['b'])
    await owned.add(loop(2), ['a'])
    expect(owned.get('b7:1')?.classes).to.deep.equal(['a', 'b'])
    const before = owned.generation
    await owned.add(loop(1), ['a'])
    expect(owned.generation, 'nothing new').to.equal(before)
    await owned.forget((o) => o.minor !== 1)
    expect(owned.generation).to.equal(before + 1)
    expect(owned.all().map((o) => o.minor)).to.deep.equal([2])
    expect(decodeOwned(await readFile(owned.file, 'utf8')).map((d) => d.minor)).to.deep.equal([2])
  })

  it('keeps which device had each number: another device at the number, or none, is told apart from the same device back', async function () {
    const disk = (n: number, serial: string) => loop(n, {ID_SERIAL: serial, ID_SERIAL_SHORT: serial})
    const owned = new OwnedDevices({stateDir: dir})
    await owned.add(disk(1, 'd'), ['disks'])
    await owned.add(disk(2, 'e'), ['disks'])
    await owned.add(disk(3, 'f'), ['disks'])
    const again = new OwnedDevices({stateDir: dir})
    await again.load()
    expect(again.all().map((d) => d.identity)).to.deep.equal([identityDigest(disk(1, 'd')), identityDigest(disk(2, 'e')), identityDigest(disk(3, 'f'))])
    // 7:1 has disk d again, 7:2 has disk g (another serial), 7:3 has nothing.
    const changed = numbersWithAnotherDevice(again.all(), [disk(1, 'd'), disk(2, 'g')])
    expect(changed.map((d) => d.minor)).to.deep.equal([2, 3])
    // A record of an earlier build (no identity) is never taken as changed.
    expect(numbersWithAnotherDevice(decodeOwned('{"version": 1, "devices": [{"type": "b", "major": 7, "minor": 2, "devNode": "/dev/loop2"}]}'), [])).to.deep.equal([])
    // Another device at the number is written at once (it is what a restart compares with).
    await again.add(disk(2, 'g'), ['disks'])
    expect(numbersWithAnotherDevice(decodeOwned(await readFile(again.file, 'utf8')), [disk(1, 'd'), disk(2, 'g')]).map((d) => d.minor)).to.deep.equal([3])
  })

  it('refuses an identity that is not 16 hex digits', () =>
    expect(() => decodeOwned('{"version": 1, "devices": [{"type": "b", "major": 7, "minor": 2, "devNode": "/dev/loop2", "identity": "x"}]}')).to.throw('devices[0].identity must be 16 hex digits'))

  it('a file it cannot decode is reported and left out', async function () {
    await writeFile(join(dir, 'owned-devices.json'), 'nope')
    const owned = new OwnedDevices({stateDir: dir})
    expect(await owned.load()).to.match(/owned-devices\.json: not JSON/)
    expect(owned.devices()).to.deep.equal([])
  })
})
