import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {addLoopDevice, BackedLoops, canUseLoopControl, loopData, removeLeftoverLoops, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {loopIndexes} from '../../harness/devices/loop-owners.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const [bound, plain, stopped, absent] = loopIndexes('test/e2e/loop-devices.test.ts') as [number, number, number, number]

const losetup = (...args: string[]): void => {
  const result = spawnSync('losetup', args, {encoding: 'utf8'})
  if (result.status !== 0) expect.fail(`losetup ${args.join(' ')}: ${result.stderr || result.error?.message}`)
}

/** What an interrupted run leaves: loop<index> present, bound to a file of its own when `data` is given. */
function leaveBehind(dir: string, index: number, data?: string): void {
  addLoopDevice(index)
  if (data === undefined) return
  writeFileSync(join(dir, `left-${index}`), data.padEnd(4096, '.'))
  losetup(`/dev/loop${index}`, join(dir, `left-${index}`))
}

describe('loop devices a run leaves behind fail no later run of their owner (the real kernel)', function () {
  const dir = mkdtempSync(join(tmpdir(), 'nfdctl-leftover-'))

  before(function () {
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    if (spawnSync('sh', ['-c', 'command -v losetup']).status !== 0) missingPrerequisite(this, 'losetup is not installed (util-linux)')
  })

  after(function () {
    for (const index of [bound, plain, stopped, absent]) {
      spawnSync('losetup', ['-d', `/dev/loop${index}`])
      removeLoopDevice(index)
    }
    rmSync(dir, {force: true, recursive: true})
  })

  it("BackedLoops adds over a leftover still bound to an earlier run's file, and the device reads its new file", async function () {
    leaveBehind(dir, bound, 'left-by-an-earlier-run')
    expect(readFileSync(`/dev/loop${bound}`).subarray(0, 22).toString()).to.equal('left-by-an-earlier-run')
    const loops = new BackedLoops(dir)
    await loops.add(bound)
    expect(readFileSync(`/dev/loop${bound}`).subarray(0, 13).toString()).to.equal(loopData(bound))
    await loops.drop(bound)
    expect(existsSync(`/sys/block/loop${bound}`)).to.equal(false)
  })

  it('addLoopDevice takes back an unbound leftover: a second add of the same index succeeds', function () {
    leaveBehind(dir, plain)
    expect(existsSync(`/sys/block/loop${plain}`)).to.equal(true)
    addLoopDevice(plain)
    expect(existsSync(`/sys/block/loop${plain}`)).to.equal(true)
    removeLoopDevice(plain)
  })

  it('removeLeftoverLoops removes the present ones of a range, bound or not, and names them', function () {
    leaveBehind(dir, stopped, 'left-by-the-demo')
    expect(removeLeftoverLoops([stopped, absent])).to.deep.equal([stopped])
    expect([existsSync(`/sys/block/loop${stopped}`), existsSync(`/sys/block/loop${absent}`)]).to.deep.equal([false, false])
  })

  it('refuses, in one line that says what to do, a leftover that something holds open', function () {
    leaveBehind(dir, absent)
    const fd = openSync(`/dev/loop${absent}`, 'r')
    try {
      expect(() => addLoopDevice(absent)).to.throw(new RegExp(`^loop${absent} was left by an earlier run and cannot be removed \\(.*\\): unmount it or close what holds it open$`))
    } finally {
      closeSync(fd)
    }
    addLoopDevice(absent)
    removeLoopDevice(absent)
  })
})
