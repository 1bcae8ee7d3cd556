import {expect} from 'chai'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {cdiDeviceNode, CdiSpecWriter, cdiVersion, type CdiSpec} from '../../../src/lib/runtime/cdi-spec.js'

const disk = {devNode: '/dev/loop7', major: 7, minor: 7, type: 'block' as const}
const specOf = (name: string): CdiSpec => ({cdiVersion, devices: [{containerEdits: {deviceNodes: [cdiDeviceNode(disk, 'rw')]}, name}], kind: 'example.com/disk'})

describe('CDI specs', function () {
  let dir: string

  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-cdi-'))
  })

  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('edits a device node at the host path unless another path is given, with the node type as CDI spells it', function () {
    expect(cdiDeviceNode(disk, 'rw')).to.deep.equal({hostPath: '/dev/loop7', major: 7, minor: 7, path: '/dev/loop7', permissions: 'rw', type: 'b'})
    expect(cdiDeviceNode({...disk, type: 'char'}, 'r', '/dev/marker')).to.include({hostPath: '/dev/loop7', path: '/dev/marker', type: 'c'})
  })

  it('writes one key in the order asked, and reports a write that fails without stopping the next', async function () {
    const failed: string[] = []
    const writer = new CdiSpecWriter((key) => failed.push(key))
    const file = join(dir, 'spec.json')
    writer.write('a', file, specOf('first'))
    writer.write('a', file, specOf('second'))
    writer.write('b', join(dir, 'missing-parent', '\0bad'), specOf('x'))
    await Promise.all([writer.written('a'), writer.written('b')])
    expect(JSON.parse(await readFile(file, 'utf8')).devices[0].name).to.equal('second')
    expect(failed).to.deep.equal(['b'])
  })
})
