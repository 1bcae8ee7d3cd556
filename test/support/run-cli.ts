import {Config} from '@oclif/core/config'
import {runCommand} from '@oclif/test'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** The CLI's configuration (its plugins and where each command lives), found once: every run starts from it. */
let config: Promise<Config> | undefined

/**
 * Loaded as runCommand loads it, under NODE_ENV=test: oclif then maps dist/commands to the TypeScript sources
 * (otherwise a tree without dist/, as a fresh clone, has no commands).
 */
async function loadConfig(): Promise<Config> {
  const before = process.env.NODE_ENV
  process.env.NODE_ENV = 'test'
  try {
    return await Config.load({root})
  } finally {
    if (before === undefined) delete process.env.NODE_ENV
    else process.env.NODE_ENV = before
  }
}

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
  config ??= loadConfig()
  const {error, result, stderr, stdout} = await runCommand<T>([...args], await config)
  const fromError = (error as (Error & {oclif?: {exit?: number}}) | undefined)?.oclif?.exit
  const exitCode = fromError ?? (typeof process.exitCode === 'number' ? process.exitCode : 0)
  process.exitCode = undefined
  return {error, exitCode, result, stderr, stdout}
}
