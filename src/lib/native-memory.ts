import type {Logger} from './observe/logger.js'
import {releaseFreeNativeMemory} from './sys/libc.js'

// Apart from memory.ts, which every command loads: this file loads koffi, which the one-shot commands do not need.

/**
 * Returns the C heap's free pages to the kernel once no burst of work has run for a while (a burst of
 * native work, such as gRPC and bpf calls, or a sweep's TLS and HTTP buffers, leaves many), and logs what it
 * gave back at debug. The agent's delay lets V8's memory reducer (about 20 s after work stops) free the
 * buffers it held first; `gc run` collects its garbage itself after a sweep and trims at once (delay 0).
 */
export class NativeMemoryTrim {
  #timer: NodeJS.Timeout | undefined

  constructor(
    private readonly logger: Logger,
    readonly delayMs = 30_000,
  ) {}

  /** Work was done: trim once it has been quiet for the delay. */
  afterWork(): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => {
      const before = process.memoryUsage.rss()
      if (!releaseFreeNativeMemory()) return
      const rss = process.memoryUsage.rss()
      this.logger.debug({returnedMb: Math.round((before - rss) / 1048576), rssMb: Math.round(rss / 1048576)}, 'free native memory returned to the kernel')
    }, this.delayMs).unref()
  }

  stop(): void {
    clearTimeout(this.#timer)
  }
}
