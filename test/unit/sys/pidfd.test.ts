import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {processStat} from '../../../src/lib/sys/pidfd.js'

describe("processStat: a process's state and start time, where no pidfd pins it", function () {
  let proc: string

  beforeEach(async function () {
    proc = await mkdtemp(join(tmpdir(), 'nfdctl-proc-'))
  })

  afterEach(async function () {
    await rm(proc, {force: true, recursive: true})
  })

  it('reads field 22 after a command name holding spaces and parentheses, and the state letter', async function () {
    await mkdir(join(proc, '7'))
    await writeFile(join(proc, '7', 'stat'), '7 (a) b (c)) S 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456789 2265088 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n')
    expect(processStat(7, proc)).to.deep.equal({startTime: 123456789n, state: 'S'})
    await writeFile(join(proc, '7', 'stat'), '7 (sleep) Z 1 7 7 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 99 0 0\n')
    expect(processStat(7, proc)).to.deep.equal({startTime: 99n, state: 'Z'})
    expect(processStat(8, proc)).to.equal(undefined)
    await writeFile(join(proc, '7', 'stat'), '7 (sleep) S 1\n')
    expect(() => processStat(7, proc)).to.throw(/unexpected .*\/7\/stat/)
  })
})
