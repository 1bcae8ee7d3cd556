import type {Logger} from '../observe/logger.js'
import {afterBatch, grantProblem, healthyGrants, type BatchOutcome, type GrantHealth} from './grant-health.js'

/**
 * Whether grants work, batch after batch (grant-health.ts judges): containers skipped in a batch (their
 * process gone or not their own) count as failures beside the ones whose change failed. A change of verdict
 * is logged once.
 */
export class GrantReadiness {
  #health: GrantHealth = healthyGrants
  /** Containers skipped in the running batch. */
  #skipped: {count: number; last?: string} = {count: 0}

  constructor(readonly logger: Logger) {}

  /** A container of the running batch was skipped. */
  skipped(error: Error): void {
    this.#skipped = {count: this.#skipped.count + 1, last: error.message}
  }

  /** How the batch's containers fared (the skipped ones are among the succeeded: the reconciler answered for them). */
  batchDone(outcome: BatchOutcome): void {
    const gone = this.#skipped
    this.#skipped = {count: 0}
    const failed = outcome.failed + gone.count
    const before = grantProblem(this.#health)
    this.#health = afterBatch(this.#health, {failed, lastError: outcome.lastError ?? gone.last, succeeded: outcome.succeeded - gone.count})
    const now = grantProblem(this.#health)
    if (now !== undefined && before === undefined)
      this.logger.error({err: this.#health.lastError, failingBatches: this.#health.failingBatches}, 'grants keep failing; /readyz says not ready until one succeeds')
    if (now === undefined && before !== undefined) this.logger.info({}, 'grants work again')
  }

  /** Why grants make the agent not ready; undefined while they work. */
  problem(): string | undefined {
    return grantProblem(this.#health)
  }
}
