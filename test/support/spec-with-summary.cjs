// The spec reporter plus the plain closing line CI reads: `N passed, N failed, N skipped`. A skipped test
// shows why (`skipped: <reason>`, recorded by test/support/prerequisites.ts) under its title, and the
// reasons are listed again, grouped with their counts, just above the closing line. With NFDCTL_TEST_TALLY
// set, the counts are appended to that file as a JSON line too (test/run.ts adds up several runs).
const {appendFileSync} = require('node:fs')
const Mocha = require('mocha')

const {EVENT_RUN_END, EVENT_TEST_PENDING} = Mocha.Runner.constants
const skipReasonKey = 'nfdctlSkipReason' // as in prerequisites.ts
const noReason = '(no reason given)'

/** The reason on the test, else on the nearest suite that skipped its tests from a `before` hook. */
function skipReasonOf(test) {
  for (let node = test; node; node = node.parent) {
    if (typeof node[skipReasonKey] === 'string') return node[skipReasonKey]
  }
  return noReason
}

function depthOf(test) {
  let depth = 0
  for (let suite = test.parent; suite && !suite.root; suite = suite.parent) depth++
  return depth
}

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options) // Spec prints `  - <title>` for a skipped test first; the reason goes under it
    // This run's counts only: a test that runs mocha itself (the reporter's own test, the unit part under
    // another Node) must not add its child's to the file, so the children do not inherit where it is.
    const tally = process.env.NFDCTL_TEST_TALLY
    delete process.env.NFDCTL_TEST_TALLY
    const reasons = new Map()
    runner.on(EVENT_TEST_PENDING, (test) => {
      const reason = skipReasonOf(test)
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
      Mocha.reporters.Base.consoleLog(`${'  '.repeat(depthOf(test))}    ${Mocha.reporters.Base.color('pending', `skipped: ${reason}`)}`)
    })
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats
      const lines = [...reasons].map(([reason, count]) => `skipped: ${reason} (${count} ${count === 1 ? 'test' : 'tests'})\n`)
      process.stdout.write(`\n${lines.join('')}${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`)
      if (tally) appendFileSync(tally, `${JSON.stringify({failed: s.failures, passed: s.passes, skipped: s.pending})}\n`)
    })
  }
}

module.exports = SpecWithSummary
