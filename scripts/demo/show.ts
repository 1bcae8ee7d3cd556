// How the demo shows what it does: a bold header per step, then each command as `$ command` and its output.
import {spawn} from 'node:child_process'
import {relative} from 'node:path'

import {repoRoot} from '../../harness/controlplane/paths.js'

export const say = (line: string): void => {
  process.stdout.write(`\n\u001B[1m# ${line}\u001B[0m\n`)
}

/** A path as the reader types it from the repository (where npm runs the demo). */
export const shown = (path: string): string => {
  const inside = relative(repoRoot, path)
  return inside !== '' && !inside.startsWith('..') && !inside.startsWith('/') ? inside : path
}

export interface RunOptions {
  /** What the reader sees after `$ ` (the command as they would type it); nothing is printed when undefined. */
  readonly display?: string
  /** Keep stdout (returned) instead of passing it through; stderr still shows. */
  readonly capture?: boolean
  /** Written to the command's stdin. */
  readonly input?: string
  /** Neither show stderr nor fail on a non-zero exit (polls and clean-ups). */
  readonly quiet?: boolean
}

/** Runs argv; resolves with its stdout when captured (and '' otherwise); rejects on a non-zero exit, naming the command. */
export async function run(argv: readonly string[], options: RunOptions = {}): Promise<string> {
  if (options.display !== undefined) process.stdout.write(`$ ${options.display}\n`)
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: repoRoot,
    stdio: [options.input === undefined ? 'ignore' : 'pipe', options.capture || options.quiet ? 'pipe' : 'inherit', options.quiet ? 'pipe' : 'inherit'],
  })
  if (options.input !== undefined) child.stdin!.end(options.input)
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  const code = await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (status) => resolve(status ?? 1))
  })
  if (code !== 0 && !options.quiet) throw new Error(`${options.display ?? argv.join(' ')} exited with ${code}${stderr.trim() ? `: ${stderr.trim()}` : ''}`)
  return stdout
}
