/** Where the reporter (spec-with-summary.cjs) finds why a test was skipped: on the test, or on a suite. */
export const skipReasonKey = 'nfdctlSkipReason'

/**
 * A test that needs something this machine may lack (the control plane build, root, containerd) calls this
 * when it is missing: under CI=true it fails, elsewhere it skips with the reason visible in the report (next
 * to the skipped test and, grouped, above the closing `N passed, N failed, N skipped` line).
 */
export function missingPrerequisite(context: Mocha.Context, reason: string): never {
  if (process.env.CI === 'true') throw new Error(`prerequisite missing under CI=true: ${reason}`)
  recordSkipReason(context, reason)
  context.skip()
  throw new Error(`skipped: ${reason}`)
}

/**
 * `this.skip()` throws at once, so the reason is stored first where the reporter looks: on the test itself
 * (in `it` or `beforeEach`), or on the suite whose `before` hook skips all of its tests.
 */
function recordSkipReason(context: Mocha.Context, reason: string): void {
  const runnable = context.test
  if (runnable === undefined) return
  const hook = runnable as Mocha.Runnable & {type?: string; originalTitle?: string}
  const target: object | undefined = hook.type !== 'hook' ? runnable : (hook.originalTitle ?? hook.title).startsWith('"before each"') ? context.currentTest : runnable.parent
  if (target !== undefined) Object.assign(target, {[skipReasonKey]: reason})
}
