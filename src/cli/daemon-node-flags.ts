/**
 * The long-running commands, whose memory matters more than their start-up or their peak speed: they are
 * started again by bin/run.js, in the same process (execve), with V8 flags that only act from Node's
 * command line.
 */
export const daemonCommands: readonly (readonly [string, string])[] = [
  ['gc', 'run'],
  ['devices', 'agent'],
  ['plugins', 'serve'],
]

/**
 * --lite-mode: V8's memory-saving mode (no compiler beyond the interpreter, feedback vectors allocated
 * lazily, smaller heap reservations); set at run time it does nothing. It took 8-11 MB off `gc run`'s peak at
 * 2,000 Nodes (bench/gc-run-memory.ts). --heap-growing-percent=20 and --no-opt are set by every command as it
 * starts (src/lib/memory.ts); on the command line they are a further 2-3 MB, because Node's own modules then
 * come from its code cache without being compiled into the heap (docs/benchmarks.md).
 */
export const defaultDaemonNodeFlags: readonly string[] = ['--lite-mode', '--no-opt', '--heap-growing-percent=20']

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
  if (script === undefined || !daemonCommands.some(([topic, command]) => first === topic && second === command)) return undefined
  const setting = env[daemonNodeFlagsVariable]
  const flags = setting === undefined ? defaultDaemonNodeFlags : setting.split(/\s+/).filter((flag) => flag !== '')
  const notFlag = flags.find((flag) => !/^--[a-z0-9][a-z0-9_-]*(=\S+)?$/.test(flag))
  if (notFlag !== undefined) throw new Error(`${daemonNodeFlagsVariable} holds "${notFlag}", which is not a Node or V8 flag: give flags such as --lite-mode, separated by spaces, or '' for none`)
  const missing = flags.filter((flag) => !execArgv.includes(flag))
  if (missing.length === 0) return undefined
  return [...execArgv, ...missing, script, ...argv.slice(2)]
}
