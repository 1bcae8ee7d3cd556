#!/usr/bin/env -S node --max-semi-space-size=4
// --max-semi-space-size: Node lets the young generation grow to 2 x 16 MB under a steady stream of
// requests (a mass cleanup, an informer): 20-30 MB of resident memory that buys no speed here. V8 sizes the
// heap when it starts, so this one flag is here; the others the commands set when they start
// (src/lib/memory.ts: a flag here that V8 hashes into its code cache makes Node compile its own modules
// from source, docs/decisions.md).

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
// Imported after the cache is on, so that the cache covers them.
// The root help and a plain `version` are answered without starting oclif where the package was packed with
// dist/cli/before-oclif.js (src/cli/before-oclif.ts): the same text in a fraction of the time. Only a command
// line of at most one word can be one of them.
const {existsSync} = process.getBuiltinModule('node:fs')
const args = process.argv.slice(2)
// A daemon (`gc run`, `devices agent`, `plugins serve`) starts once more in the same process, with the V8 flags
// that act only from Node's command line (src/cli/daemon-node-flags.ts): Node >= 22.15 has execve, and a packed
// package has the module. The pid, the open standard streams and the environment stay.
const daemonFlags = new URL('../dist/cli/daemon-node-flags.js', import.meta.url)
if (args.length >= 2 && process.execve !== undefined && existsSync(daemonFlags)) {
  const {daemonRelaunchArgs} = await import(daemonFlags.href)
  let relaunch
  try {
    relaunch = daemonRelaunchArgs(process.argv, process.execArgv, process.env)
  } catch (error) {
    process.stderr.write(`Error: ${error.message}\n`)
    process.exit(2)
  }
  if (relaunch !== undefined) process.execve(process.execPath, [process.execPath, ...relaunch], process.env)
}
const beforeOclif = new URL('../dist/cli/before-oclif.js', import.meta.url)
let answered = false
if (args.length <= 1 && existsSync(beforeOclif)) answered = await (await import(beforeOclif.href)).answerWithoutOclif(args, new URL('..', import.meta.url))
if (!answered) {
  // dist/cli/execute.js is oclif's runner, bundled with the commands at pack time (scripts/bundle.mjs); a
  // checkout that was never built has no dist/, and there (the unit tests run this file over the TypeScript
  // sources) oclif runs from node_modules.
  const runner = new URL('../dist/cli/execute.js', import.meta.url)
  const {execute} = await import(existsSync(runner) ? runner.href : '@oclif/core/execute')
  await execute({dir: import.meta.url})
}
