/** What the batches that changed containers achieved, in a row: the agent's own part of /readyz. */
export interface GrantHealth {
  /** Batches in a row in which every container looked at failed (none was brought to its plan). */
  readonly failingBatches: number
  readonly lastError?: string
}

/** One batch's containers: brought to their plan, or not (an error, or a process that is gone or not its own). */
export interface BatchOutcome {
  readonly succeeded: number
  readonly failed: number
  readonly lastError?: string
}

/** Failing batches in a row that make the agent not ready: one or two are a container that went away meanwhile. */
const failingBatchesNotReady = 3

export const healthyGrants: GrantHealth = {failingBatches: 0}

/** Pure: a batch with any container done is healthy; one where all failed adds to the run; one with none judges nothing. */
export function afterBatch(health: GrantHealth, outcome: BatchOutcome): GrantHealth {
  if (outcome.succeeded > 0) return healthyGrants
  if (outcome.failed === 0) return health
  return {failingBatches: health.failingBatches + 1, lastError: outcome.lastError ?? health.lastError}
}

/** Why grants make the agent not ready; undefined while they work. */
export function grantProblem(health: GrantHealth): string | undefined {
  if (health.failingBatches < failingBatchesNotReady) return undefined
  return `grants failing: no container could be changed in ${health.failingBatches} batches in a row, the last error: ${health.lastError ?? 'unknown'}`
}
