import {expect} from 'chai'

import {nfdctl} from '../../support/run-cli.js'

// Flags are checked before any cluster is contacted: one line naming the flag, exit 2.
describe('gc run: bad input', function () {
  const cases: Array<[string, string[], RegExp]> = [
    ['zero --interval', ['--interval', '0'], /^--interval must be greater than 0, got "0"$/],
    ['malformed --interval', ['--interval', 'hourly'], /^--interval must be a duration such as 30s, 5m or 1h, got "hourly"$/],
    ['malformed --grace-period', ['--grace-period', '-5s'], /^--grace-period must be a duration/],
    ['--metrics-port out of range', ['--metrics-port', '70000'], /^--metrics-port must be a port from 1 to 65535, or 0 to disable, got 70000$/],
    ['unknown --log-format', ['--log-format', 'xml'], /^--log-format must be json or text, got "xml"$/],
    ['unknown --log-level', ['--log-level', 'trace'], /^--log-level must be one of debug, info, warn, error, got "trace"$/],
    [
      'lease shorter than the renew deadline',
      ['--leader-elect', '--leader-elect-lease-duration', '5s', '--leader-elect-renew-deadline', '10s'],
      /^--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline$/,
    ],
    [
      'renew deadline shorter than the retry period',
      ['--leader-elect', '--leader-elect-renew-deadline', '1s', '--leader-elect-retry-period', '2s', '--leader-elect-lease-duration', '15s'],
      /^--leader-elect-renew-deadline must be longer than --leader-elect-retry-period$/,
    ],
    ['an --interval longer than a timer can wait', ['--interval', '720h'], /^--interval must be at most 596h \(24 days\), got "720h"$/],
    ['a --grace-period longer than a timer can wait', ['--grace-period', '1000h'], /^--grace-period must be at most 596h/],
    ['a shared sweep flag', ['--max-delete-ratio', '7'], /^--max-delete-ratio must be a number from 0 to 1, got 7$/],
    ['a --dry-run, which gc run does not have', ['--dry-run'], /^Nonexistent flag: --dry-run \(see --help\)$/],
  ]
  for (const [name, args, message] of cases) {
    it(`${name}: exit 2 with one line`, async function () {
      const run = await nfdctl(['gc', 'run', '--kubeconfig', '/nonexistent/kubeconfig', ...args])
      expect(run.exitCode).to.equal(2)
      expect(run.error?.message).to.match(message)
      expect(run.error?.message).to.not.contain('\n')
    })
  }

  it('a missing kubeconfig is reported after the flags are valid', async function () {
    const run = await nfdctl(['gc', 'run', '--kubeconfig', '/nonexistent/kubeconfig'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.equal('kubeconfig /nonexistent/kubeconfig does not exist; pass an existing file with --kubeconfig')
  })
})
