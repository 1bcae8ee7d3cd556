import {expect} from 'chai'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {nfdctl} from '../../support/run-cli.js'

// Bad input is rejected before any cluster is contacted: one line naming the flag, exit 2, with and without --json.
describe('gc once: bad input', function () {
  const kubeconfigDir = mkdtempSync(join(tmpdir(), 'nfdctl-flags-'))
  const brokenKubeconfig = join(kubeconfigDir, 'broken')
  writeFileSync(brokenKubeconfig, 'apiVersion: v1\nkind: Config\nclusters: [oops\n')
  after(() => rmSync(kubeconfigDir, {force: true, recursive: true}))

  const cases: Array<[string, string[], RegExp]> = [
    ['unknown flag', ['--bogus'], /^Nonexistent flag: --bogus \(see --help\)$/],
    ['non-numeric --qps', ['--qps', 'abc'], /^--qps must be a number, got "abc"$/],
    ['zero --qps', ['--qps', '0'], /^--qps must be a number > 0, got 0$/],
    ['--max-delete-ratio above 1', ['--max-delete-ratio', '1.5'], /^--max-delete-ratio must be a number from 0 to 1, got 1.5$/],
    ['fractional --concurrency', ['--concurrency', '2.5'], /^--concurrency: Expected an integer but received: 2.5$/],
    ['zero --concurrency', ['--concurrency', '0'], /^--concurrency must be a whole number >= 1, got 0$/],
    ['negative --list-size', ['--list-size', '-1'], /^--list-size must be a whole number >= 0, got -1/],
    ['unknown output format', ['-o', 'xml'], /Expected --output=xml to be one of: table, json, yaml/],
    ['--fail-on-stale without --dry-run', ['--fail-on-stale'], /^--fail-on-stale only applies to --dry-run/],
    ['malformed --timeout', ['--timeout', 'soon'], /^--timeout must be a duration such as 30s, 5m or 0 \(none\), got "soon"$/],
    ['a --timeout longer than a timer can wait', ['--timeout', '720h'], /^--timeout must be at most 596h \(24 days\), or 0 for none, got "720h"$/],
    ['unknown kind', ['--kinds', 'NodeFeature,Pods'], /^--kinds: unknown kind "Pods"; choose from NodeFeature, NodeResourceTopology$/],
    ['missing kubeconfig file', ['--kubeconfig', join(kubeconfigDir, 'absent')], /^kubeconfig .*absent does not exist; pass an existing file with --kubeconfig$/],
    ['unparsable kubeconfig', ['--kubeconfig', brokenKubeconfig], /^kubeconfig .*broken cannot be read: /],
  ]

  for (const [name, args, message] of cases) {
    it(`${name}: exit 2 with one line`, async function () {
      const run = await nfdctl(['gc', 'once', ...args])
      expect(run.exitCode).to.equal(2)
      expect(run.error?.message).to.match(message)
      expect(run.error?.message).to.not.contain('\n')
    })

    it(`${name} under --json: exit 2 and a JSON error`, async function () {
      const run = await nfdctl(['gc', 'once', '--json', ...args])
      expect(run.exitCode).to.equal(2)
      const body = JSON.parse(run.stdout) as {error: {message: string; exitCode: number}}
      expect(body.error.exitCode).to.equal(2)
      expect(body.error.message).to.match(message)
    })
  }

  it('an unknown --context lists the contexts the kubeconfig has', async function () {
    const file = join(kubeconfigDir, 'two-contexts')
    writeFileSync(
      file,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'a',
        clusters: [{cluster: {server: 'https://127.0.0.1:1'}, name: 'c'}],
        contexts: [
          {context: {cluster: 'c', user: 'u'}, name: 'a'},
          {context: {cluster: 'c', user: 'u'}, name: 'b'},
        ],
        users: [{name: 'u', user: {token: 't'}}],
      }),
    )
    const run = await nfdctl(['gc', 'once', '--kubeconfig', file, '--context', 'prod'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^context "prod" is not in kubeconfig .*two-contexts; available: a, b$/)
  })
})
