import {expect} from 'chai'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {nfdctl} from '../../support/run-cli.js'

// Bad input is rejected before any cluster is contacted: one line naming the flag, exit 2.
describe('doctor: bad input', function () {
  const kubeconfigDir = mkdtempSync(join(tmpdir(), 'nfdctl-doctor-flags-'))
  after(() => rmSync(kubeconfigDir, {force: true, recursive: true}))

  const cases: Array<[string, string[], RegExp]> = [
    ['unknown flag', ['--bogus'], /^Nonexistent flag: --bogus \(see --help\)$/],
    ['unknown output format', ['-o', 'xml'], /Expected --output=xml to be one of: table, json, yaml/],
    ['missing kubeconfig file', ['--kubeconfig', join(kubeconfigDir, 'absent')], /^kubeconfig .*absent does not exist; pass an existing file with --kubeconfig$/],
  ]

  for (const [name, args, message] of cases) {
    it(`${name}: exit 2 with one line`, async function () {
      const run = await nfdctl(['doctor', ...args])
      expect(run.exitCode).to.equal(2)
      expect(run.error?.message).to.match(message)
      expect(run.error?.message).to.not.contain('\n')
    })
  }
})
