/** Process exit codes shared by every command. */
export const ExitCode = {failed: 1, ok: 0, staleFound: 3, usage: 2} as const
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode]

/**
 * Base of every error nfdctl raises on purpose. `oclif.exit` is what @oclif/core reads outside `--json`,
 * `exitCode` what it reads under `--json`; both are set so the exit code is the same either way.
 */
export class NfdctlError extends Error {
  readonly oclif: {exit: number}

  constructor(
    message: string,
    readonly exitCode: number,
    options?: ErrorOptions,
  ) {
    super(message, options)
    this.name = new.target.name
    this.oclif = {exit: exitCode}
  }
}

/** A flag or argument is wrong; the message says which and how to fix it. */
export class UsageError extends NfdctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, ExitCode.usage, options)
  }
}

/** A configuration file (kubeconfig, class file) is missing or wrong. */
export class ConfigError extends NfdctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, ExitCode.usage, options)
  }
}

/** The API server could not be reached or kept failing after retries. */
export class ApiUnavailableError extends NfdctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, ExitCode.failed, options)
  }
}

/** Work was refused because doing it could lose live data. */
export class SafetyStopError extends NfdctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, ExitCode.failed, options)
  }
}

/** Something was cancelled (signal or --timeout) before it finished. */
export class AbortedError extends NfdctlError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, ExitCode.failed, options)
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
