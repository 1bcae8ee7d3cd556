import {expect} from 'chai'

import {ExitCode} from '../../../src/lib/errors.js'
import {gcKinds} from '../../../src/lib/gc/kinds.js'
import {runOptionsFrom, type RawRunFlags} from '../../../src/lib/gc/run-options.js'
import {usageErrorFrom} from '../../support/thrown.js'

/** What oclif hands over for `gc run` with no flags (src/cli/run-flags.ts, sweep-flags.ts and kube-flags.ts). */
const defaults: RawRunFlags = {
  'allow-empty-nodes': false,
  burst: 100,
  concurrency: 16,
  force: false,
  'grace-period': '30s',
  interval: '1h',
  'keep-unlabelled': false,
  'leader-elect': false,
  'leader-elect-lease-duration': '15s',
  'leader-elect-lease-name': 'nfdctl-gc',
  'leader-elect-renew-deadline': '10s',
  'leader-elect-retry-period': '2s',
  'list-size': 500,
  'log-level': 'info',
  'max-delete-ratio': 0.5,
  'metrics-port': 8080,
  qps: 50,
}

describe('runOptionsFrom', () => {
  it('accepts the defaults', () => {
    expect(runOptionsFrom(defaults, false)).to.deep.equal({
      allowEmptyNodes: false,
      burst: 100,
      concurrency: 16,
      dryRun: false,
      failOnStale: false,
      force: false,
      graceMs: 30_000,
      intervalMs: 3_600_000,
      keepUnlabelled: false,
      kinds: gcKinds,
      leaderElection: undefined,
      listSize: 500,
      logFormat: 'json',
      logLevel: 'info',
      maxDeleteRatio: 0.5,
      metricsPort: 8080,
      qps: 50,
      timeoutMs: 0,
    })
  })

  it('never dry-runs and has no sweep timeout', () => {
    const options = runOptionsFrom(defaults, true)
    expect(options).to.include({dryRun: false, failOnStale: false, timeoutMs: 0})
  })

  describe('log format', () => {
    const cases: Array<[title: string, flag: string | undefined, tty: boolean, format: string]> = [
      ['default on a terminal', undefined, true, 'text'],
      ['default when piped', undefined, false, 'json'],
      ['text asked for when piped', 'text', false, 'text'],
      ['json asked for on a terminal', 'json', true, 'json'],
    ]
    for (const [title, flag, tty, format] of cases) {
      it(`${title} → ${format}`, () => {
        expect(runOptionsFrom({...defaults, 'log-format': flag}, tty).logFormat).to.equal(format)
      })
    }
  })

  describe('accepts valid values', () => {
    const cases: Array<[title: string, flags: Partial<RawRunFlags>, expected: Record<string, unknown>]> = [
      ['interval 5m', {interval: '5m'}, {intervalMs: 300_000}],
      ['interval 1h30m', {interval: '1h30m'}, {intervalMs: 5_400_000}],
      ['interval 1ms (smallest positive)', {interval: '1ms'}, {intervalMs: 1}],
      ['interval bare 90 = seconds', {interval: '90'}, {intervalMs: 90_000}],
      ['grace-period 0: delete at once', {'grace-period': '0'}, {graceMs: 0}],
      ['grace-period 0s', {'grace-period': '0s'}, {graceMs: 0}],
      ['grace-period 2m', {'grace-period': '2m'}, {graceMs: 120_000}],
      ['metrics-port 0 disables', {'metrics-port': 0}, {metricsPort: 0}],
      ['metrics-port 1', {'metrics-port': 1}, {metricsPort: 1}],
      ['metrics-port 65535', {'metrics-port': 65_535}, {metricsPort: 65_535}],
      ['log-level debug', {'log-level': 'debug'}, {logLevel: 'debug'}],
      ['log-level warn', {'log-level': 'warn'}, {logLevel: 'warn'}],
      ['log-level error', {'log-level': 'error'}, {logLevel: 'error'}],
      ['shared sweep flags pass through', {concurrency: 4, 'list-size': 0, 'max-delete-ratio': 1, qps: 5}, {concurrency: 4, listSize: 0, maxDeleteRatio: 1, qps: 5}],
    ]
    for (const [title, flags, expected] of cases) {
      it(title, () => {
        expect(runOptionsFrom({...defaults, ...flags}, false)).to.include(expected)
      })
    }

    it('kinds narrows to one kind', () => {
      const options = runOptionsFrom({...defaults, kinds: 'noderesourcetopologies'}, false)
      expect(options.kinds.map((k) => k.kind)).to.deep.equal(['NodeResourceTopology'])
    })
  })

  describe('leader election', () => {
    it('on with the default durations', () => {
      expect(runOptionsFrom({...defaults, 'leader-elect': true}, false).leaderElection).to.deep.equal({
        leaseDurationMs: 15_000,
        name: 'nfdctl-gc',
        namespace: undefined,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2000,
      })
    })

    it('on with a namespace, lease name and custom durations', () => {
      const options = runOptionsFrom(
        {
          ...defaults,
          'leader-elect': true,
          'leader-elect-lease-duration': '1m',
          'leader-elect-lease-name': 'gc-lock',
          'leader-elect-namespace': 'nfd',
          'leader-elect-renew-deadline': '40s',
          'leader-elect-retry-period': '500ms',
        },
        false,
      )
      expect(options.leaderElection).to.deep.equal({leaseDurationMs: 60_000, name: 'gc-lock', namespace: 'nfd', renewDeadlineMs: 40_000, retryPeriodMs: 500})
    })

    it('off: its durations are not checked, even when wrong', () => {
      const options = runOptionsFrom(
        {
          ...defaults,
          'leader-elect-lease-duration': '1s',
          'leader-elect-renew-deadline': 'soon',
          'leader-elect-retry-period': '0',
        },
        false,
      )
      expect(options.leaderElection).to.equal(undefined)
    })
  })

  describe('rejects each mistake with a UsageError naming the flag', () => {
    const cases: Array<[title: string, flags: Partial<RawRunFlags>, flag: string]> = [
      ['interval 0', {interval: '0'}, '--interval'],
      ['interval 0s', {interval: '0s'}, '--interval'],
      ['interval -1s', {interval: '-1s'}, '--interval'],
      ['interval abc', {interval: 'abc'}, '--interval'],
      ['interval empty', {interval: ''}, '--interval'],
      ['interval 1d (unknown unit)', {interval: '1d'}, '--interval'],
      ['grace-period x', {'grace-period': 'x'}, '--grace-period'],
      ['grace-period -5s', {'grace-period': '-5s'}, '--grace-period'],
      ['metrics-port -1', {'metrics-port': -1}, '--metrics-port'],
      ['metrics-port 65536', {'metrics-port': 65_536}, '--metrics-port'],
      ['metrics-port 1.5', {'metrics-port': 1.5}, '--metrics-port'],
      ['metrics-port NaN', {'metrics-port': Number.NaN}, '--metrics-port'],
      ['log-format xml', {'log-format': 'xml'}, '--log-format'],
      ['log-format JSON (case matters)', {'log-format': 'JSON'}, '--log-format'],
      ['log-format empty', {'log-format': ''}, '--log-format'],
      ['log-level trace', {'log-level': 'trace'}, '--log-level'],
      ['log-level INFO (case matters)', {'log-level': 'INFO'}, '--log-level'],
      ['log-level fatal (pino has it, nfdctl does not)', {'log-level': 'fatal'}, '--log-level'],
      ['lease duration = renew deadline', {'leader-elect': true, 'leader-elect-lease-duration': '10s'}, '--leader-elect-lease-duration'],
      ['lease duration < renew deadline', {'leader-elect': true, 'leader-elect-lease-duration': '5s'}, '--leader-elect-lease-duration'],
      ['renew deadline = retry period', {'leader-elect': true, 'leader-elect-renew-deadline': '2s'}, '--leader-elect-renew-deadline'],
      ['renew deadline < retry period', {'leader-elect': true, 'leader-elect-retry-period': '12s'}, '--leader-elect-renew-deadline'],
      ['malformed retry period', {'leader-elect': true, 'leader-elect-retry-period': 'soon'}, '--leader-elect-retry-period'],
      ['zero retry period', {'leader-elect': true, 'leader-elect-retry-period': '0'}, '--leader-elect-retry-period'],
      ['malformed renew deadline', {'leader-elect': true, 'leader-elect-renew-deadline': '10 s'}, '--leader-elect-renew-deadline'],
      ['malformed lease duration', {'leader-elect': true, 'leader-elect-lease-duration': 'forever'}, '--leader-elect-lease-duration'],
      ['zero lease duration', {'leader-elect': true, 'leader-elect-lease-duration': '0s'}, '--leader-elect-lease-duration'],
      ['max-delete-ratio 2 (shared sweep check)', {'max-delete-ratio': 2}, '--max-delete-ratio'],
      ['kinds Pods (shared sweep check)', {kinds: 'Pods'}, '--kinds'],
      ['concurrency 0 (shared sweep check)', {concurrency: 0}, '--concurrency'],
      ['qps 0 (shared sweep check)', {qps: 0}, '--qps'],
    ]
    for (const [title, flags, flag] of cases) {
      it(`${title} → ${flag}`, () => {
        const error = usageErrorFrom(() => runOptionsFrom({...defaults, ...flags}, true))
        expect(error.exitCode).to.equal(ExitCode.usage)
        expect(error.exitCode).to.equal(2)
        expect(error.oclif.exit).to.equal(2)
        expect(error.message).to.include(flag)
      })
    }

    it('quotes the bad value', () => {
      expect(usageErrorFrom(() => runOptionsFrom({...defaults, interval: 'abc'}, false)).message).to.include('"abc"')
      expect(usageErrorFrom(() => runOptionsFrom({...defaults, 'log-format': 'xml'}, false)).message).to.include('"xml"')
      expect(usageErrorFrom(() => runOptionsFrom({...defaults, 'metrics-port': 65_536}, false)).message).to.include('65536')
    })

    it('says a positive duration is needed for interval 0', () => {
      expect(usageErrorFrom(() => runOptionsFrom({...defaults, interval: '0'}, false)).message).to.include('greater than 0')
    })

    it('lists the valid log levels', () => {
      expect(usageErrorFrom(() => runOptionsFrom({...defaults, 'log-level': 'trace'}, false)).message).to.include('debug, info, warn, error')
    })
  })
})
