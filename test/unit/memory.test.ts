import {execFile} from 'node:child_process'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

import {expect} from 'chai'

import {returnIdleMemory} from '../../src/lib/memory.js'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/**
 * V8's --trace-opt decisions to compile a function with TurboFan, taken in a hot loop run after `setUp`
 * (compilations decided before it may still finish after).
 */
async function turboFanLinesAfter(setUp: string): Promise<number> {
  const script = `import {holdMemoryDown} from './src/lib/memory.ts'
${setUp}
console.log('--- hot loop ---')
function twice(x) { return x * 2 + 1 }
let sum = 0
for (let i = 0; i < 1e7; i++) sum += twice(i)
console.log(sum > 0)`
  const {stdout} = await promisify(execFile)(process.execPath, ['--trace-opt', '--import', 'tsx', '--input-type=module', '-e', script], {cwd: repo, maxBuffer: 64 << 20, timeout: 20_000})
  const after = stdout.slice(stdout.indexOf('--- hot loop ---'))
  return after.split('\n').filter((line) => line.startsWith('[marking') && line.includes('TURBOFAN')).length
}

describe('memory: V8 settings set when a command starts', function () {
  this.timeout(30_000)

  it('holdMemoryDown keeps TurboFan from compiling what runs after it, as --no-opt on the command line does', async () => {
    // The same loop without the call is what shows the trace names TurboFan at all.
    expect(await turboFanLinesAfter('')).to.be.greaterThan(0)
    expect(await turboFanLinesAfter('holdMemoryDown()')).to.equal(0)
  })

  it('returnIdleMemory collects garbage in a process started without --expose-gc', async () => {
    expect((globalThis as {gc?: unknown}).gc, 'mocha runs without --expose-gc').to.equal(undefined)
    const weak = ((): WeakRef<object> => new WeakRef({payload: new Array(1000).fill('x')}))()
    // A WeakRef's target is held until the job that made it ends.
    await new Promise((resolve) => setImmediate(resolve))
    returnIdleMemory()
    expect(weak.deref()).to.equal(undefined)
  })

  it("collectYoungGarbage frees the memory of buffers let go of (a list page's chunks), without a full collection", async () => {
    // In a process of its own: in this one, the other tests' allocations may have the young generation
    // collected while the buffers are still held, which moves them to the old generation, out of its reach.
    const script = `import {collectYoungGarbage} from './src/lib/memory.ts'
      const mb = () => process.memoryUsage().arrayBuffers / 1048576
      // Unpooled, as a TLS socket's reads are: 6.25 MB of buffers that outlive nothing but this block.
      ;(() => { const chunks = Array.from({length: 400}, () => Buffer.allocUnsafeSlow(16 * 1024)); chunks.length = 0 })()
      const before = mb()
      const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
      collectYoungGarbage()
      // V8 frees dead buffers' memory on a background thread after the collection: up to a second for it.
      let after = mb()
      for (let i = 0; i < 50 && after > before - 6; i++) after = (await sleep(20), mb())
      console.log(JSON.stringify({after, before}))`
    const {stdout} = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {cwd: repo, timeout: 20_000})
    const {after, before} = JSON.parse(stdout) as {after: number; before: number}
    // Without the call Node 20 keeps them counted (a second and more, measured); Node 26 at times frees them by itself.
    expect(before, 'the buffers counted before the collection').to.be.greaterThan(6)
    expect(after, 'after it').to.be.lessThan(before - 6)
  })

  it('every command loads memory.ts; the one-shot commands that touch no device do not load koffi, gc run does (malloc_trim)', async () => {
    const script = `
      const {readFileSync} = await import('node:fs')
      // koffi's native library mapped into the process: loaded however it was imported.
      const koffiLoaded = () => readFileSync('/proc/self/maps', 'utf8').includes('koffi')
      for (const command of ['gc/once', 'version', 'doctor']) await import('./src/commands/' + command + '.ts')
      const oneShot = koffiLoaded()
      await import('./src/commands/gc/run.ts')
      const gcRun = koffiLoaded()
      await import('./src/commands/devices/agent.ts')
      console.log(JSON.stringify({gcRun, oneShot, withDevices: koffiLoaded()}))`
    const {stdout} = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {cwd: repo, timeout: 20_000})
    expect(JSON.parse(stdout)).to.deep.equal({gcRun: true, oneShot: false, withDevices: true})
  })
})
