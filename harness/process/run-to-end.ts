import {spawn} from 'node:child_process'

export interface RunResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** From spawning the command to its exit. */
  readonly ms: number
}

/** Runs a command to its end and keeps all it printed; a non-zero exit is a result, not an exception. */
export function runToEnd(file: string, args: readonly string[], options: {cwd?: string; env?: NodeJS.ProcessEnv} = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(file, args, {cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({code: code ?? -1, ms: performance.now() - started, stderr, stdout}))
  })
}
