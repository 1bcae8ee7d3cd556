import {runCommand} from '@oclif/test'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

export interface CliRun<T> {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
  readonly result?: T
  readonly error?: Error
}

/**
 * Runs an nfdctl command in-process (from src/, through oclif's dev mapping) and reports its exit code,
 * whether it came from an error or from process.exitCode, which is then reset so mocha's own exit code is
 * not affected.
 */
export async function nfdctl<T = unknown>(args: readonly string[]): Promise<CliRun<T>> {
  process.exitCode = undefined
  const {error, result, stderr, stdout} = await runCommand<T>([...args], {root})
  const fromError = (error as (Error & {oclif?: {exit?: number}}) | undefined)?.oclif?.exit
  const exitCode = fromError ?? (typeof process.exitCode === 'number' ? process.exitCode : 0)
  process.exitCode = undefined
  return {error, exitCode, result, stderr, stdout}
}
