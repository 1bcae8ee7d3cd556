import {releaseFreeNativeMemory} from './sys/libc.js'

// Apart from memory.ts, which every command loads: this file loads koffi, which the one-shot commands do not need.

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
