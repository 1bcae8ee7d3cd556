import {setFlagsFromString} from 'node:v8'
import {runInNewContext} from 'node:vm'

/**
 * V8's settings for a command that works in bursts (a mass cleanup, an informer, a hot-plug storm), set when the
 * command starts rather than on bin/run.js's `#!` line: any of them there makes V8 refuse the code cache Node
 * ships for its own modules (it was made under default flags), 20-25 ms of every start (docs/decisions.md).
 * Set at run time they act the same from then on.
 * --no-opt: no TurboFan. Its compiler and code were 10-40 MB of peak RSS (gc run's peak at the 100 MB budget
 * without it); the price is about twice the CPU per request once warm, 2-6 % of gc once's time. Ignition and
 * Sparkplug still run everything.
 * --heap-growing-percent=20: in a mass cleanup every in-flight request's objects outlive the young generation;
 * V8 would let that garbage grow the old generation to about twice what is live before collecting it.
 */
export function holdMemoryDown(): void {
  setFlagsFromString('--no-opt')
  setFlagsFromString('--heap-growing-percent=20')
}

type GarbageCollector = (options?: {type?: 'major' | 'minor'}) => void
let collectGarbage: GarbageCollector | undefined

/** V8 hands out its collector only to a context made after --expose-gc is set. */
function garbageCollector(): GarbageCollector {
  if (collectGarbage === undefined) {
    setFlagsFromString('--expose-gc')
    collectGarbage = runInNewContext('gc') as GarbageCollector
  }
  return collectGarbage
}

/**
 * Work done in bursts (a sweep's list pages) leaves megabytes of
 * old-generation garbage that V8 would keep resident until its next major collection, which an idle daemon
 * may not have for hours: collect it now.
 * (Measured after a 7,000-node sweep: 83 → 81–82 MB steady; what it returns grows with what was parsed.)
 */
export function returnIdleMemory(): void {
  garbageCollector()()
}

/**
 * A collection of the young generation only (a scavenge: under a millisecond), for a caller that has just
 * let go of megabytes of buffers, a list page read in chunks and joined. V8 frees a buffer's memory (on a
 * background thread, right after) when a collection finds it dead, and a page decoded into a few small objects fills the young generation too
 * slowly to start one: the dead pages of a node list otherwise pile up until V8's limit on outside memory
 * starts a collection (38 MB of them at `gc once`'s peak, docs/benchmarks.md).
 */
export function collectYoungGarbage(): void {
  garbageCollector()({type: 'minor'})
}
