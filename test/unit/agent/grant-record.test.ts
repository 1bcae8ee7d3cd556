import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {mkdtemp, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {DeviceAccess} from '../../../src/lib/agent/container-access.js'
import {decodeGrants, decodeJournal, deviceOfGrant, encodeGrants, encodeJournalLine, GrantRecord, grantsAfter, grantsBefore, type RecordedGrant} from '../../../src/lib/agent/grant-record.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'

const grant = (text: string): RecordedGrant => {
  const [type, numbers, access, devNode] = text.split(' ')
  const [major, minor] = numbers.split(':').map(Number)
  return {access, devNode, major, minor, type: type as 'b' | 'c'}
}
const loop = (minor: number, access = 'rw'): DeviceAccess => ({access, device: loopDevice(minor)})
const held = (...ids: string[]): Map<string, unknown> => new Map(ids.map((id) => [id, true]))
const show = (grants: readonly RecordedGrant[]): string[] => grants.map((g) => `${g.type} ${g.major}:${g.minor} ${g.access} ${g.devNode}`)

describe('grant record: what the agent granted each container', function () {
  describe('grantsBefore: recorded before a change is applied', function () {
    it("adds the change's grants beside the recorded ones, and a device granted anew takes its own place", function () {
      const recorded = [grant('b 7:1 r /dev/loop1'), grant('b 7:2 rw /dev/loop2')]
      expect(show(grantsBefore(recorded, {grant: [loop(2, 'r'), loop(3)], revoke: [loop(1, 'r')]}))).to.deep.equal([
        'b 7:1 r /dev/loop1', // taken back only once the change is applied
        'b 7:2 r /dev/loop2',
        'b 7:3 rw /dev/loop3',
      ])
      expect(grantsBefore([], {grant: [], revoke: []})).to.deep.equal([])
    })
  })

  describe('grantsAfter: recorded once a change was applied', function () {
    const cases: Array<[string, RecordedGrant[], Map<string, unknown>, {grant: DeviceAccess[]; revoke: DeviceAccess[]}, string[]]> = [
      ['nothing changed: every recorded grant still held stays', [grant('b 7:1 rw /dev/loop1')], held('b7:1'), {grant: [], revoke: []}, ['b 7:1 rw /dev/loop1']],
      ['a revoked grant goes', [grant('b 7:1 rw /dev/loop1'), grant('b 7:2 rw /dev/loop2')], held('b7:1', 'b7:2'), {grant: [], revoke: [loop(1)]}, ['b 7:2 rw /dev/loop2']],
      ['a grant whose rule is gone from the cgroup goes', [grant('b 7:1 rw /dev/loop1')], held(), {grant: [], revoke: []}, []],
      ['a grant comes', [], held(), {grant: [loop(4)], revoke: []}, ['b 7:4 rw /dev/loop4']],
      ['an access changed: revoked and granted, recorded once with the new access', [grant('b 7:1 rw /dev/loop1')], held('b7:1'), {grant: [loop(1, 'r')], revoke: [loop(1)]}, ['b 7:1 r /dev/loop1']],
      ["a device held but never recorded stays unrecorded (kubelet's, or the runtime's)", [], held('b7:9'), {grant: [], revoke: [loop(9)]}, []],
    ]
    for (const [name, recorded, heldNow, change, want] of cases) it(name, () => expect(show(grantsAfter(recorded, heldNow, change))).to.deep.equal(want))
  })

  it('deviceOfGrant: a device gone, as the record knows it (its id, numbers and node)', function () {
    expect(deviceOfGrant(grant('c 188:0 rw /dev/ttyUSB0'))).to.deep.include({devName: 'ttyUSB0', devNode: '/dev/ttyUSB0', id: 'c188:0', major: 188, minor: 0, type: 'char'})
    expect(deviceOfGrant(grant('c 13:64 r /dev/input/event0'))).to.deep.include({devName: 'input/event0', id: 'c13:64', kernelName: 'event0'})
  })

  describe('encodeGrants and decodeGrants', function () {
    it('round-trips, with the containers in id order and those without grants left out', function () {
      const records = new Map([
        ['b2', [grant('b 7:2 rw /dev/loop2')]],
        ['a1', [grant('c 188:0 r /dev/ttyUSB0'), grant('b 259:1048575 rwm /dev/nvme0n1')]],
        ['c3', []],
      ])
      const text = encodeGrants(records)
      expect(text).to.equal(
        '{"containers":{"a1":[{"access":"r","devNode":"/dev/ttyUSB0","major":188,"minor":0,"type":"c"},{"access":"rwm","devNode":"/dev/nvme0n1","major":259,"minor":1048575,"type":"b"}],'
          + '"b2":[{"access":"rw","devNode":"/dev/loop2","major":7,"minor":2,"type":"b"}]},"version":1}\n',
      )
      expect(decodeGrants(text)).to.deep.equal(new Map([...records].filter(([, g]) => g.length > 0)))
    })

    const valid = {access: 'rw', devNode: '/dev/loop1', major: 7, minor: 1, type: 'b'}
    const file = (containers: unknown, version: unknown = 1): string => JSON.stringify({containers, version})
    const bad: Array<[string, string, RegExp]> = [
      ['not JSON', '{"containers":', /^not JSON \(/],
      ['another version', file({}, 2), /^version must be 1, got 2$/],
      ['no containers', JSON.stringify({version: 1}), /^containers must be an object of container ids$/],
      ['containers as a list', file([]), /^containers must be an object of container ids$/],
      ['an id that is no container id', file({'../x': [valid]}), /^containers: "\.\.\/x" is not a container id$/],
      ['grants not a list', file({abc: valid}), /^containers\["abc"\] must be a list of grants$/],
      ['type a', file({abc: [{...valid, type: 'a'}]}), /^containers\["abc"\]\[0\]\.type must be "b" or "c", got "a"$/],
      ['a major over 12 bits', file({abc: [valid, {...valid, major: 4096}]}), /^containers\["abc"\]\[1\]\.major must be 0-4095, got 4096$/],
      ['a negative minor', file({abc: [{...valid, minor: -1}]}), /\.minor must be 0-1048575, got -1$/],
      ['a minor as text', file({abc: [{...valid, minor: '1'}]}), /\.minor must be 0-1048575, got "1"$/],
      ['no access', file({abc: [{...valid, access: ''}]}), /\.access must be r, w, m or several in that order, got ""$/],
      ['access out of order', file({abc: [{...valid, access: 'wr'}]}), /\.access must be r, w, m or several in that order, got "wr"$/],
      ['a node outside /dev', file({abc: [{...valid, devNode: '/etc/passwd'}]}), /\.devNode must be a path below \/dev\/, got "\/etc\/passwd"$/],
      ['a node that climbs out of /dev', file({abc: [{...valid, devNode: '/dev/../etc/passwd'}]}), /\.devNode must be a path below \/dev\/, got "\/dev\/\.\.\/etc\/passwd"$/],
      ['no node', file({abc: [{...valid, devNode: undefined}]}), /\.devNode must be a path below \/dev\/, got undefined$/],
    ]
    for (const [name, text, message] of bad) it(`refuses ${name}, saying what is wrong`, () => expect(() => decodeGrants(text)).to.throw(message))
  })

  describe('GrantRecord: the file under --state-dir', function () {
    let dir: string
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'nfdctl-grants-'))
    })
    afterEach(async () => {
      await rm(dir, {force: true, recursive: true})
    })

    it('starts empty without a file, writes each change (creating the directory), and a new record reads it back', async function () {
      const file = join(dir, 'state', 'grants.json')
      const record = new GrantRecord({stateDir: join(dir, 'state')})
      expect(await record.load()).to.equal(undefined)
      expect(record.grants('abc')).to.deep.equal([])
      await record.set('abc', [grant('b 7:1 rw /dev/loop1')])
      await record.set('def', [grant('b 7:2 r /dev/loop2')])
      const again = new GrantRecord({stateDir: join(dir, 'state')})
      expect(await again.load()).to.equal(undefined)
      expect(show(again.grants('abc'))).to.deep.equal(['b 7:1 rw /dev/loop1'])
      expect(show(again.grants('def'))).to.deep.equal(['b 7:2 r /dev/loop2'])
      // Containers that no longer exist are dropped.
      await again.retain(new Set(['def']))
      expect(decodeGrants(await readFile(file, 'utf8'))).to.deep.equal(new Map([['def', [grant('b 7:2 r /dev/loop2')]]]))
      expect(await readdir(join(dir, 'state')), 'no temporary file left').to.deep.equal(['grants.json'])
    })

    it('coalesces changes made together: every one is on disk once each has resolved', async function () {
      const file = join(dir, 'grants.json')
      const record = new GrantRecord({stateDir: dir})
      const writes = Array.from({length: 50}, (_, i) => record.set(`c${i}`, [grant(`b 7:${i} rw /dev/loop${i}`)]))
      expect(new Set(writes).size, 'writes started for 50 changes made together').to.equal(1)
      await Promise.all(writes)
      expect(decodeGrants(await readFile(file, 'utf8')).size).to.equal(50)
      await record.set('c0', [])
      expect(decodeGrants(await readFile(file, 'utf8')).has('c0')).to.equal(false)
    })

    it('setNow has the change on disk when it returns (one line appended to the journal), and the next write of the file takes the journal in', async function () {
      const journal = join(dir, 'grants.journal')
      const record = new GrantRecord({stateDir: dir})
      record.setNow('abc', [grant('b 7:1 rw /dev/loop1')])
      record.setNow('abc', [grant('b 7:1 rw /dev/loop1'), grant('b 7:2 r /dev/loop2')])
      record.setNow('abc', [grant('b 7:1 rw /dev/loop1'), grant('b 7:2 r /dev/loop2')]) // nothing changed: nothing written
      expect(decodeJournal(readFileSync(journal, 'utf8')).map(([id, grants]) => [id, show(grants)])).to.deep.equal([
        ['abc', ['b 7:1 rw /dev/loop1']],
        ['abc', ['b 7:1 rw /dev/loop1', 'b 7:2 r /dev/loop2']],
      ])
      const again = new GrantRecord({stateDir: dir})
      expect(await again.load()).to.equal(undefined)
      expect(show(again.grants('abc')), 'read over the file').to.deep.equal(['b 7:1 rw /dev/loop1', 'b 7:2 r /dev/loop2'])
      await record.set('abc', [grant('b 7:2 r /dev/loop2')])
      expect(readFileSync(journal, 'utf8'), 'emptied once the file has everything').to.equal('')
      expect(show(decodeGrants(readFileSync(join(dir, 'grants.json'), 'utf8')).get('abc')!)).to.deep.equal(['b 7:2 r /dev/loop2'])
      record.close()
    })

    it('reads the journal over an older file (stopped between the two): every grant of its lines is known, and a torn last line is left out', async function () {
      await writeFile(
        join(dir, 'grants.json'),
        encodeGrants(
          new Map([
            ['abc', [grant('b 7:1 rw /dev/loop1')]],
            ['old', [grant('b 7:5 r /dev/loop5')]],
          ]),
        ),
      )
      await writeFile(
        join(dir, 'grants.journal'),
        [encodeJournalLine('abc', [grant('b 7:1 rw /dev/loop1'), grant('b 7:2 r /dev/loop2')]), encodeJournalLine('def', [grant('b 7:3 rw /dev/loop3')]), '{"container": "ghi", "gra'].join(''),
      )
      const record = new GrantRecord({stateDir: dir})
      expect(await record.load()).to.equal(undefined)
      expect(show(record.grants('abc'))).to.deep.equal(['b 7:1 rw /dev/loop1', 'b 7:2 r /dev/loop2'])
      expect(show(record.grants('def'))).to.deep.equal(['b 7:3 rw /dev/loop3'])
      expect(show(record.grants('old'))).to.deep.equal(['b 7:5 r /dev/loop5'])
      expect(record.grants('ghi')).to.deep.equal([])
      await writeFile(join(dir, 'grants.journal'), `not json\n${encodeJournalLine('abc', [])}`)
      expect(await new GrantRecord({stateDir: dir}).load(), 'a line no write of the journal starts so').to.match(/grants\.journal: line 1: not JSON \(/)
    })

    it('decodeJournal leaves out a line torn anywhere (it starts as every line does), and reads a whole line glued onto a torn one', function () {
      const line = encodeJournalLine('abc', [grant('b 7:1 rw /dev/loop1')])
      const next = encodeJournalLine('def', [grant('b 7:2 r /dev/loop2')])
      for (const torn of [line.slice(0, 1), line.slice(0, 5), line.slice(0, 30), line.slice(0, -3)]) {
        const read = (text: string) => decodeJournal(text).map(([id, grants]) => [id, show(grants)])
        expect(read(`${encodeJournalLine('abc', [])}${torn}\n${next}${torn}`), JSON.stringify(torn)).to.deep.equal([
          ['abc', []],
          ['def', ['b 7:2 r /dev/loop2']],
        ])
        expect(read(`${torn}${next}${torn}`), `glued onto ${JSON.stringify(torn)}`).to.deep.equal([['def', ['b 7:2 r /dev/loop2']]])
      }
      expect(() => decodeJournal(`${encodeJournalLine('abc', [])}{"grants": [\n`)).to.throw(/^line 2: not JSON/)
      expect(() => decodeJournal(`garbage${next}`)).to.throw(/^line 1: not JSON/)
    })

    it('after a line torn in its write (an agent stopped in it), the next line starts on its own, and both lines around it are read', async function () {
      const journal = join(dir, 'grants.journal')
      const line = encodeJournalLine('abc', [grant('b 7:1 rw /dev/loop1'), grant('b 7:2 r /dev/loop2')])
      await writeFile(journal, `${encodeJournalLine('abc', [grant('b 7:1 rw /dev/loop1')])}${line.slice(0, 40)}`)
      const record = new GrantRecord({stateDir: dir})
      expect(await record.load()).to.equal(undefined)
      expect(show(record.grants('abc'))).to.deep.equal(['b 7:1 rw /dev/loop1'])
      record.setNow('def', [grant('b 7:3 rw /dev/loop3')])
      record.setNow('ghi', [grant('b 7:4 rw /dev/loop4')])
      record.close()
      expect(readFileSync(journal, 'utf8').split('\n')[1]).to.equal(line.slice(0, 40))
      const again = new GrantRecord({stateDir: dir})
      expect(await again.load()).to.equal(undefined)
      expect([...['abc', 'def', 'ghi'].map((id) => show(again.grants(id)))]).to.deep.equal([['b 7:1 rw /dev/loop1'], ['b 7:3 rw /dev/loop3'], ['b 7:4 rw /dev/loop4']])
    })

    it('stop() has the change made soon on disk before it closes the journal', async function () {
      const record = new GrantRecord({stateDir: dir})
      record.setNow('abc', [grant('b 7:1 rw /dev/loop1')])
      void record.set('abc', [])
      await record.stop()
      expect(decodeGrants(readFileSync(join(dir, 'grants.json'), 'utf8')).size).to.equal(0)
      expect(readFileSync(join(dir, 'grants.journal'), 'utf8')).to.equal('')
    })

    it('a journal line it cannot write leaves the record as it was, and the same change is tried again', async function () {
      await writeFile(join(dir, 'blocked'), 'a file where the directory should be')
      const record = new GrantRecord({stateDir: join(dir, 'blocked')})
      expect(() => record.setNow('abc', [grant('b 7:1 rw /dev/loop1')])).to.throw(/EEXIST|ENOTDIR/)
      expect(record.grants('abc')).to.deep.equal([])
      await rm(join(dir, 'blocked'))
      record.setNow('abc', [grant('b 7:1 rw /dev/loop1')])
      expect(decodeJournal(readFileSync(join(dir, 'blocked', 'grants.journal'), 'utf8'))).to.have.length(1)
      record.close()
    })

    it('a file it cannot decode is reported and left out, and the next write replaces it', async function () {
      const file = join(dir, 'grants.json')
      await writeFile(file, '{"version": 1, "containers": {"abc": [{"type": "x"}]}}')
      const record = new GrantRecord({stateDir: dir})
      expect(await record.load()).to.equal(`${file}: containers["abc"][0].type must be "b" or "c", got "x"`)
      expect(record.grants('abc')).to.deep.equal([])
      await record.set('def', [grant('b 7:2 r /dev/loop2')])
      expect([...decodeGrants(await readFile(file, 'utf8')).keys()]).to.deep.equal(['def'])
    })

    it('a write that fails rejects, and the next change writes everything', async function () {
      const file = join(dir, 'blocked', 'grants.json')
      await writeFile(join(dir, 'blocked'), 'a file where the directory should be')
      const record = new GrantRecord({stateDir: join(dir, 'blocked')})
      let failure: unknown
      await record.set('abc', [grant('b 7:1 rw /dev/loop1')]).catch((error: unknown) => {
        failure = error
      })
      expect(String(failure)).to.match(/EEXIST|ENOTDIR/)
      await rm(join(dir, 'blocked'))
      // The same grants again: not a change in memory, but not on disk yet either.
      await record.set('abc', [grant('b 7:1 rw /dev/loop1')])
      expect(show(decodeGrants(await readFile(file, 'utf8')).get('abc')!)).to.deep.equal(['b 7:1 rw /dev/loop1'])
    })
  })
})
