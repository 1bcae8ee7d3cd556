import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {fileURLToPath} from 'node:url'

import {startedEarly} from '../../support/started-early.js'

const runBin = fileURLToPath(new URL('../../../bin/run.js', import.meta.url))

interface PipedRun {
  readonly code: number
  readonly stderr: string
}

/**
 * The CLI as a child with stderr on a pipe, as under journald or `kubectl logs`; bin/run.js as installed
 * (not dev.js, which prints stacks), with NODE_ENV=test so oclif runs the TypeScript sources.
 */
async function piped(args: readonly string[]): Promise<PipedRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [runBin, ...args], {env: {...process.env, NODE_ENV: 'test'}}, (error, _stdout, stderr) => resolve({code: typeof error?.code === 'number' ? error.code : 0, stderr}))
  })
}

// oclif hard-wraps errors and warnings at 80 columns when stderr is not a terminal: a log line each half.
describe('errors and warnings on a pipe are one line each', function () {
  this.timeout(60_000)
  // Each child loads the CLI from its sources (about a second of CPU): started while mocha loads the files.
  const badNodeName = startedEarly(() => piped(['devices', 'agent', '--node-name', 'Bad_Name']))
  const unknownFlag = startedEarly(() => piped(['devices', 'agent', '--no-such-flag']))
  const longWarning = startedEarly(() => piped(['devices', 'list', '--output', 'json']))

  it('a bad --node-name: one line, exit 2', async function () {
    const run = await badNodeName
    expect(run.code).to.equal(2)
    expect(run.stderr).to.equal('Error: the node name "Bad_Name" is not a valid Node name (lower-case DNS subdomain); pass the Node\'s name with --node-name or $NODE_NAME\n')
  })

  it('an unknown flag: one line, exit 2', async function () {
    const run = await unknownFlag
    expect(run.code).to.equal(2)
    expect(run.stderr).to.equal('Error: Nonexistent flag: --no-such-flag (see --help)\n')
  })

  it('a warning longer than 80 columns: one line', async function () {
    const run = await longWarning
    expect(run.code).to.equal(0)
    expect(run.stderr).to.equal('Warning: no DeviceClasses given (--class-file, --kubeconfig): showing every device\n')
  })
})
