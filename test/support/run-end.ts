const stops: Array<() => Promise<void>> = []

/**
 * Has `stop` run when the test run ends (test/support/hooks.ts). A support module that starts something for the
 * run registers its stop as it is loaded, so a run that never loads it (the unit tests) loads none of it. The
 * last registered stops first: a module registers after the modules it imports, so the test node stops before
 * the control plane it needs.
 */
export function stopAtRunEnd(stop: () => Promise<void>): void {
  stops.push(stop)
}

/** Runs every registered stop, the last registered first; each one runs even after another failed, and the first failure is thrown. */
export async function stopRegistered(): Promise<void> {
  await runEvery(stops.splice(0).reverse())
}

/** Runs the steps in order, each one even after another failed; throws the first failure once all have run (clean-ups). */
export async function runEvery(steps: ReadonlyArray<() => Promise<unknown>>): Promise<void> {
  let failure: unknown
  for (const step of steps) {
    try {
      await step()
    } catch (error) {
      failure ??= error
    }
  }
  if (failure !== undefined) throw failure
}
