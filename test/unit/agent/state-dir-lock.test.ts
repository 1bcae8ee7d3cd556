import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {lockFileName, lockStateDir, StateDirLockedError} from '../../../src/lib/agent/state-dir-lock.js'
import {waitFor} from '../../../harness/process/wait.js'

/** Another process holding the lock file with flock(2): util-linux's flock(1) (its command, in its process group, does not hold it). */
async function holdLock(path: string): Promise<{pid: number; kill: () => Promise<void>}> {
  const child = spawn('flock', ['--exclusive', '--close', path, 'sh', '-c', 'echo locked; exec sleep 600'], {detached: true, stdio: ['ignore', 'pipe', 'inherit']})
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve())
    child.once('exit', (code) => reject(new Error(`flock exited ${code}`)))
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const kill = (): Promise<void> => {
    process.kill(-child.pid!, 'SIGKILL')
    return exited
  }
  return {kill, pid: child.pid!}
}

describe('state-dir-lock: one agent per state directory', () => {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-lock-'))
  })
  afterEach(async () => {
    await rm(dir, {force: true, recursive: true})
  })

  it('takes the lock, writes its PID, and a second taker in this process is refused until it is released', async () => {
    const stateDir = join(dir, 'state')
    const lock = await lockStateDir(stateDir, new AbortController().signal, {wait: false})
    expect(await readFile(join(stateDir, lockFileName), 'utf8')).to.equal(`${process.pid}\n`)
    // flock(2) locks belong to the open file: a second open, even in the same process, is refused.
    const refused = await lockStateDir(stateDir, new AbortController().signal, {wait: false}).catch((error: unknown) => error)
    expect(refused).to.be.instanceOf(StateDirLockedError)
    expect((refused as StateDirLockedError).exitCode).to.equal(1)
    expect((refused as Error).message).to.equal(
      `another devices agent (PID ${process.pid}) holds ${join(stateDir, lockFileName)}: one agent per node; stop it, or start this one with --wait-for-lock to take over when it exits`,
    )
    lock.release()
    lock.release()
    const again = await lockStateDir(stateDir, new AbortController().signal, {wait: false})
    again.release()
  })

  it('held by another process: waits, told once, and takes the lock once the holder is killed', async () => {
    const holder = await holdLock(join(dir, lockFileName))
    const told: Array<number | undefined> = []
    let taken = false
    // flock(1) writes no PID, so there is no exit to wake on: the lock is tried again every recheckMs.
    const waiting = lockStateDir(dir, new AbortController().signal, {onWaiting: (pid) => told.push(pid), recheckMs: 20, wait: true}).then((lock) => {
      taken = true
      return lock
    })
    await waitFor('told it waits', async () => told.length > 0, {intervalMs: 5})
    expect(taken).to.equal(false)
    await holder.kill()
    const lock = await waiting
    expect(told, 'flock(1) writes no PID: told once, without one').to.deep.equal([undefined])
    expect(await readFile(join(dir, lockFileName), 'utf8')).to.equal(`${process.pid}\n`)
    lock.release()
  })

  it('stops waiting when its signal aborts', async () => {
    const holder = await holdLock(join(dir, lockFileName))
    try {
      const controller = new AbortController()
      const waiting = lockStateDir(dir, controller.signal, {wait: true}).catch((error: unknown) => error)
      controller.abort()
      expect(((await waiting) as Error).message).to.match(/^stopped while waiting for the lock on /)
    } finally {
      await holder.kill()
    }
  })
})
