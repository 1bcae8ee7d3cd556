/** The work started so far, settled or not: the next starts after it. */
let running: Promise<unknown> = Promise.resolve()

/**
 * Starts `work` ahead of its test and hands back its promise. Called in a describe body, that is while mocha
 * loads the test files: mocha loads every file before it runs the first test, so a child process whose outcome
 * a test checks runs on another core meanwhile, instead of holding up the run when the test gets to it. One
 * runs at a time, after those started before it: mocha itself keeps one core busy, and more children at once
 * would take it from the tests. A rejection is kept for the test that awaits the promise; until then it is not
 * reported as unhandled.
 */
export function startedEarly<T>(work: () => Promise<T>): Promise<T> {
  const started = running.then(work)
  running = started.catch(() => undefined)
  return started
}
