import {expect} from 'chai'
import koffi from 'koffi'
import {readFileSync} from 'node:fs'

import {releaseFreeNativeMemory} from '../../src/lib/sys/libc.js'

const rssBytes = (): number => Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096

// On the real C library: freed memory below the heap's top stays in the RSS until it is trimmed. The agent
// relies on that call to give a burst's buffers back (bench:agent: 90 → 83 MB with 100 pods).
describe('releaseFreeNativeMemory', function () {
  it('gives freed C-heap pages back to the kernel (glibc malloc_trim)', function () {
    const libc = koffi.load(null as unknown as string)
    const malloc = libc.func('void *malloc(size_t n)')
    const free = libc.func('void free(void *p)')
    const memset = libc.func('void *memset(void *p, int c, size_t n)')
    // 48 MB in 16 KiB blocks (under glibc's mmap threshold, so they come from the heap's top one after the
    // other), each touched so its pages are resident; the last one is kept, so free() cannot shrink the top.
    const blocks = Array.from({length: 3072}, () => {
      const block = malloc(16_384)
      memset(block, 1, 16_384)
      return block
    })
    const above = blocks.pop()
    for (const block of blocks) free(block)
    const before = rssBytes()
    expect(releaseFreeNativeMemory()).to.equal(true)
    const returned = before - rssBytes()
    free(above)
    expect(returned, `RSS went down by ${(returned / 1048576).toFixed(1)} MB`).to.be.greaterThan(32 * 1048576)
  })
})
