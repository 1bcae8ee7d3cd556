/**
 * The long-running commands, whose steady memory matters more than their start-up: bin/run.js starts them
 * again in the same process (execve) with V8 flags on Node's command line, where some act that do nothing set
 * at run time. Measured under Node 26.12.1 (bench:agent, bench:gc-run; docs/benchmarks.md):
 * --lite-mode (V8's memory-saving mode: the interpreter only, feedback vectors allocated on demand) took
 * `gc run` from 96 to 79 MB of peak at 2,000 Nodes, and the agent from 112 to 83-85 MB with 100 pods, but
 * the agent's hot-plug p95 under load became 13-34 ms from run to run: the agent and the device plugins keep
 * the baseline compiler and drop the two optimising ones (--no-opt: TurboFan; --no-maglev: Maglev, on by
 * default from Node 22, which --no-opt leaves on), 89-102 MB with p95 14-17 ms. --heap-growing-percent=20 as
 * src/lib/memory.ts sets it at run time for every command; on the command line Node's own modules come
 * from its code cache instead of being compiled into the heap.
 */
const withoutOptimisingCompilers = ['--no-opt', '--no-maglev', '--heap-growing-percent=20']
export const daemonNodeFlags: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>([
  ['gc run', ['--lite-mode', '--no-opt', '--heap-growing-percent=20']],
  ['devices agent', withoutOptimisingCompilers],
  ['plugins serve', withoutOptimisingCompilers],
])

/** What an operator sets to give the daemons other flags, or none ('' keeps the process as started). */
export const daemonNodeFlagsVariable = 'NFDCTL_DAEMON_NODE_FLAGS'

/**
 * Node's arguments to start a daemon command again with its flags, or undefined when the command is not a
 * daemon or every flag is already on Node's command line (the second start, or an operator's own).
 * Throws on a setting that is not a list of flags (it would otherwise become Node's script or arguments).
 * Pure: bin/run.js passes process.argv, process.execArgv and the environment, and does the execve.
 */
export function daemonRelaunchArgs(argv: readonly string[], execArgv: readonly string[], env: NodeJS.ProcessEnv): string[] | undefined {
  const [, script, first, second] = argv
  const ownFlags = daemonNodeFlags.get(`${first} ${second}`)
  if (script === undefined || ownFlags === undefined) return undefined
  const setting = env[daemonNodeFlagsVariable]
  const flags = setting === undefined ? ownFlags : setting.split(/\s+/).filter((flag) => flag !== '')
  const notFlag = flags.find((flag) => !/^--[a-z0-9][a-z0-9_-]*(=\S+)?$/.test(flag))
  if (notFlag !== undefined) throw new Error(`${daemonNodeFlagsVariable} holds "${notFlag}", which is not a Node or V8 flag: give flags such as --lite-mode, separated by spaces, or '' for none`)
  const missing = flags.filter((flag) => !execArgv.includes(flag))
  if (missing.length === 0) return undefined
  return [...execArgv, ...missing, script, ...argv.slice(2)]
}
