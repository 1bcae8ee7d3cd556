import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {decodeJournal, GrantRecord, type RecordedGrant} from '../../src/lib/agent/grant-record.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const grants = (count: number, first = 0): RecordedGrant[] => Array.from({length: count}, (_, i) => ({access: 'rw', devNode: `/dev/loop${first + i}`, major: 7, minor: first + i, type: 'b'}))

/** Fills the file system with one file until the kernel says ENOSPC; returns the file. */
function fill(dir: string): string {
  const filler = join(dir, 'filler')
  const fd = openSync(filler, 'w')
  try {
    const page = Buffer.alloc(4096, 'x')
    for (;;) writeSync(fd, page)
  } catch (error) {
    expect((error as NodeJS.ErrnoException).code).to.equal('ENOSPC')
  } finally {
    closeSync(fd)
  }
  return filler
}

describe('grant record on a full disk: a journal line without room is taken back, and the journal stays whole (real kernel, a 16 KiB tmpfs)', function () {
  const base = mkdtempSync(join(tmpdir(), 'nfdctl-journal-'))
  const record = new GrantRecord({stateDir: base})
  let mounted = false

  before(function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'mounting a tmpfs needs root')
    const result = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=16k,mode=0700', 'nfdctl-journal', base], {encoding: 'utf8'})
    if (result.status !== 0) expect.fail(`mount -t tmpfs: ${result.stderr}`)
    mounted = true
  })

  after(function () {
    record.close()
    if (mounted) spawnSync('umount', [base])
    rmSync(base, {force: true, recursive: true})
  })

  it('setNow throws on ENOSPC and on a short write, keeps the record and the file as they were, and a line written once there is room is read back with every earlier one', async function () {
    const journal = join(base, 'grants.journal')
    let filler = fill(base)
    expect(() => record.setNow('first', grants(1))).to.throw(/ENOSPC/)
    expect(record.grants('first')).to.deep.equal([])
    rmSync(filler)

    record.setNow('first', grants(1))
    record.setNow('second', grants(2, 10))
    const whole = readFileSync(journal, 'utf8')
    filler = fill(base)
    // About 4 KiB: more than the journal's page has left, so the kernel writes the rest of the page and stops.
    for (const attempt of ['first', 'again']) {
      expect(() => record.setNow('second', grants(60, 10)), attempt).to.throw(/short write \(the disk is full\?\)/)
      expect(record.grants('second'), 'the record as it was').to.deep.equal(grants(2, 10))
      expect(readFileSync(journal, 'utf8'), 'the torn part taken back').to.equal(whole)
    }

    rmSync(filler)
    record.setNow('third', grants(1, 100))
    const lines = decodeJournal(readFileSync(journal, 'utf8'))
    expect(lines.map(([id, g]) => [id, g.length])).to.deep.equal([
      ['first', 1],
      ['second', 2],
      ['third', 1],
    ])
    const again = new GrantRecord({stateDir: base})
    expect(await again.load(), 'no problem reading it back').to.equal(undefined)
    expect(again.grants('first')).to.deep.equal(grants(1))
    expect(again.grants('second')).to.deep.equal(grants(2, 10))
    expect(again.grants('third')).to.deep.equal(grants(1, 100))
  })
})
