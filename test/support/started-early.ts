/**
 * Starts `work` at once and hands back its promise. Called in a describe body, that is while mocha loads the
 * test files: mocha loads every file before it runs the first test, so a child process whose outcome a test
 * checks runs on another core meanwhile, instead of holding up the run when the test gets to it. A rejection
 * is kept for the test that awaits the promise; until then it is not reported as unhandled.
 */
export function startedEarly<T>(work: () => Promise<T>): Promise<T> {
  const started = work()
  started.catch(() => undefined)
  return started
}
