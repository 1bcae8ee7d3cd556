#!/usr/bin/env -S node --max-semi-space-size=4 --heap-growing-percent=20 --no-opt --expose-gc
// --max-semi-space-size: Node lets the young generation grow to 2 x 16 MB under a steady stream of
// requests (a mass cleanup, an informer): 20-30 MB of resident memory that buys no speed here.
// --heap-growing-percent: in a mass cleanup every in-flight request's objects outlive the young generation;
// V8 would let that garbage grow the old generation to about twice what is live before collecting it.
// --no-opt: no TurboFan. Its compiler and code were 10-40 MB of peak RSS (gc run's peak at the 100 MB budget
// without it); the price is about twice the CPU per request once warm, 2-6 % of gc once's time (docs/benchmarks.md).
// Ignition and Sparkplug still run everything.
// --expose-gc: gc run collects after each sweep, so an idle daemon does not keep a sweep's garbage resident.
// (docs/benchmarks.md: where the memory goes.)

// Node's compile cache (Node >= 22.1; the call is absent on 20): V8's code for the CLI's files, kept between
// runs so that each run does not compile them again (docs/benchmarks.md, bench:startup). In the user's cache
// directory beside oclif's, not Node's default under /tmp, where another user could have put the directory
// first. Where it cannot be written (a read-only root file system in a pod) Node runs without it, silently.
// NODE_COMPILE_CACHE names another directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
const {enableCompileCache} = process.getBuiltinModule('node:module')
if (enableCompileCache !== undefined) {
  const {homedir} = process.getBuiltinModule('node:os')
  enableCompileCache(process.env.NODE_COMPILE_CACHE || `${process.env.XDG_CACHE_HOME || `${homedir()}/.cache`}/nfdctl/compile-cache`)
}
// Imported after the cache is on, so that the cache covers it. dist/cli/execute.js is oclif's runner, bundled
// with the commands at pack time (scripts/bundle.mjs); a checkout that was never built has no dist/, and there
// (the unit tests run this file over the TypeScript sources) oclif runs from node_modules.
const runner = new URL('../dist/cli/execute.js', import.meta.url)
const {execute} = await import(process.getBuiltinModule('node:fs').existsSync(runner) ? runner.href : '@oclif/core/execute')
await execute({dir: import.meta.url})
