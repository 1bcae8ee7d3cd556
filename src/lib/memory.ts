import {releaseFreeNativeMemory} from './sys/libc.js'

/**
 * Work done in bursts (a sweep's list pages) leaves megabytes of
 * old-generation garbage that V8 would keep resident until its next major collection, which an idle daemon
 * may not have for hours: collect it now. Only when Node runs with --expose-gc, as bin/run.js starts it.
 * (Measured after a 7,000-node sweep: 83 → 81–82 MB steady; what it returns grows with what was parsed.)
 */
export function returnIdleMemory(): void {
  ;(globalThis as {gc?: () => void}).gc?.()
}

/**
 * Returns the C heap's free pages to the kernel once no burst of work has run for a while (a burst of
 * native work, such as gRPC and bpf calls, leaves many). The delay lets V8's memory reducer (about 20 s
 * after work stops) free the buffers it held first.
 */
export class NativeMemoryTrim {
  #timer: NodeJS.Timeout | undefined

  constructor(
    private readonly onTrimmed: (returnedMb: number, rssMb: number) => void = () => {},
    readonly delayMs = 30_000,
  ) {}

  /** Work was done: trim once it has been quiet for the delay. */
  afterWork(): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => {
      const before = process.memoryUsage.rss()
      if (releaseFreeNativeMemory()) this.onTrimmed(Math.round((before - process.memoryUsage.rss()) / 1048576), Math.round(process.memoryUsage.rss() / 1048576))
    }, this.delayMs).unref()
  }

  stop(): void {
    clearTimeout(this.#timer)
  }
}
