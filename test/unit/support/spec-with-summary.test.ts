import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {startedEarly} from '../../support/started-early.js'

const root = fileURLToPath(new URL('../../..', import.meta.url))

interface FixtureRun {
  readonly code: number
  readonly stdout: string
}

/**
 * The reporter fixture in its own mocha, with the reporter and the TypeScript loader `npm test` uses (given
 * to node itself, so mocha needs no second process for it); CI as given (undefined = unset).
 */
async function runFixture(ci: string | undefined, tally?: string): Promise<FixtureRun> {
  const env = {...process.env, CI: ci, ...(tally === undefined ? {} : {NFDCTL_TEST_TALLY: tally})}
  if (ci === undefined) delete env.CI
  const args = ['--import', 'tsx', 'node_modules/mocha/bin/mocha.js', '--no-config', '--no-color', '--reporter', './test/support/spec-with-summary.cjs', 'test/fixtures/reporter/skips.spec.ts']
  return new Promise((resolve) => {
    execFile(process.execPath, args, {cwd: root, env}, (error, stdout) => resolve({code: error ? Number(error.code) : 0, stdout}))
  })
}

describe('test reporter (spec-with-summary.cjs) and missingPrerequisite', function () {
  this.timeout(30_000)
  const outsideCi = startedEarly(() => runFixture(undefined))
  const underCi = startedEarly(() => runFixture('true'))

  it("outside CI shows each skip's reason under the test and, grouped with counts, above the summary line", async () => {
    const {code, stdout} = await outsideCi
    expect(code, stdout).to.equal(0)
    const lines = stdout.trimEnd().split('\n')
    expect(lines.at(-1)).to.equal('2 passed, 0 failed, 5 skipped')
    expect(lines.slice(-4, -1).sort()).to.deep.equal(['skipped: (no reason given) (1 test)', 'skipped: needs /dev/loop-control (2 tests)', 'skipped: needs root (2 tests)'])
    // Under each skipped test, whether skipped in the test, in beforeEach, or by a before hook of a parent suite.
    for (const [title, reason] of [
      ['needs root in the test', 'needs root'],
      ['needs root too', 'needs root'],
      ['first of the suite', 'needs /dev/loop-control'],
      ['inside a nested suite', 'needs /dev/loop-control'],
    ]) {
      const at = lines.findIndex((l) => l.trim() === `- ${title}`)
      expect(at, `${title} in\n${stdout}`).to.be.greaterThan(-1)
      expect(lines[at + 1].trim()).to.equal(`skipped: ${reason}`)
    }
  })

  it('under CI=true a missing prerequisite fails instead, naming it', async () => {
    const {code, stdout} = await underCi
    expect(code, stdout).to.equal(3)
    expect(stdout).to.include('prerequisite missing under CI=true: needs root')
    expect(stdout).to.include('prerequisite missing under CI=true: needs /dev/loop-control')
    expect(stdout.trimEnd().split('\n').at(-1)).to.equal('1 passed, 3 failed, 1 skipped')
  })

  it('with NFDCTL_TEST_TALLY, appends its one closing count to that file as a JSON line (test/run.ts adds runs up)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nfdctl-tally-'))
    try {
      await runFixture(undefined, join(dir, 'tally.jsonl'))
      expect(await readFile(join(dir, 'tally.jsonl'), 'utf8')).to.equal('{"failed":0,"passed":2,"skipped":5}\n')
    } finally {
      await rm(dir, {force: true, recursive: true})
    }
  })
})
