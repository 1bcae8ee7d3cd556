import {expect} from 'chai'
import {mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {writeFileAtomic} from '../../../src/lib/sys/atomic-write.js'

// On the real file system: what a crash-safe state file needs is that readers see the old or the new content.
describe('writeFileAtomic', function () {
  let dir: string
  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-atomic-'))
  })
  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('replaces the content whole, with exactly the mode asked for whatever the umask, and leaves no temporary file', async function () {
    const file = join(dir, 'classes.json')
    await writeFile(file, 'old')
    const umask = process.umask(0o077)
    try {
      await writeFileAtomic(file, 'new content', {mode: 0o644})
    } finally {
      process.umask(umask)
    }
    expect(await readFile(file, 'utf8')).to.equal('new content')
    expect((await stat(file)).mode & 0o777).to.equal(0o644)
    expect(await readdir(dir)).to.deep.equal(['classes.json'])
  })

  it('a failed write leaves the old content and no temporary file, and throws', async function () {
    const file = join(dir, 'state')
    await mkdir(file) // a directory where the file should go: the rename fails
    let error: unknown
    await writeFileAtomic(file, 'new').catch((e: unknown) => (error = e))
    expect((error as NodeJS.ErrnoException).code).to.be.oneOf(['EISDIR', 'ENOTEMPTY', 'EEXIST'])
    expect((await stat(file)).isDirectory()).to.equal(true)
    expect(await readdir(dir)).to.deep.equal(['state'])
  })

  it('throws when the directory does not exist, and creates nothing', async function () {
    let error: unknown
    await writeFileAtomic(join(dir, 'missing', 'file'), 'x').catch((e: unknown) => (error = e))
    expect((error as NodeJS.ErrnoException).code).to.equal('ENOENT')
    expect(await readdir(dir)).to.deep.equal([])
  })
})
