import {expect} from 'chai'

import {gcKinds} from '../../../src/lib/gc/kinds.js'
import {sweepOptionsFrom, type RawSweepFlags} from '../../../src/lib/gc/sweep-options.js'
import {usageErrorFrom} from '../../support/thrown.js'

/** The defaults oclif hands over for `gc once` with no flags (see src/cli/sweep-flags.ts and kube-flags.ts). */
const defaults: RawSweepFlags = {
  'allow-empty-nodes': false,
  burst: 100,
  concurrency: 16,
  'dry-run': false,
  'fail-on-stale': false,
  force: false,
  'keep-unlabelled': false,
  'list-size': 500,
  'max-delete-ratio': 0.5,
  qps: 50,
  timeout: '5m',
}

describe('sweepOptionsFrom', () => {
  it('accepts the defaults and maps every flag', () => {
    expect(sweepOptionsFrom(defaults)).to.deep.equal({
      allowEmptyNodes: false,
      burst: 100,
      concurrency: 16,
      dryRun: false,
      failOnStale: false,
      force: false,
      keepUnlabelled: false,
      kinds: gcKinds,
      listSize: 500,
      maxDeleteRatio: 0.5,
      qps: 50,
      timeoutMs: 300_000,
    })
  })

  it('passes the boolean flags through', () => {
    const options = sweepOptionsFrom({...defaults, 'allow-empty-nodes': true, 'dry-run': true, 'fail-on-stale': true, force: true, 'keep-unlabelled': true})
    expect(options).to.include({allowEmptyNodes: true, dryRun: true, failOnStale: true, force: true, keepUnlabelled: true})
  })

  describe('accepts boundary values', () => {
    const cases: Array<[title: string, flags: Partial<RawSweepFlags>, expected: Record<string, unknown>]> = [
      ['max-delete-ratio 0', {'max-delete-ratio': 0}, {maxDeleteRatio: 0}],
      ['max-delete-ratio 1', {'max-delete-ratio': 1}, {maxDeleteRatio: 1}],
      ['list-size 0 (list everything at once)', {'list-size': 0}, {listSize: 0}],
      ['concurrency 1', {concurrency: 1}, {concurrency: 1}],
      ['burst 1', {burst: 1}, {burst: 1}],
      ['fractional qps 0.5', {qps: 0.5}, {qps: 0.5}],
      ['no client-side caps (the default)', {burst: undefined, qps: undefined}, {burst: undefined, qps: undefined}],
      ['fail-on-stale with dry-run', {'dry-run': true, 'fail-on-stale': true}, {dryRun: true, failOnStale: true}],
      ["timeout '90s' -> 90000", {timeout: '90s'}, {timeoutMs: 90_000}],
      ["timeout '0' -> 0 (no deadline)", {timeout: '0'}, {timeoutMs: 0}],
      ["timeout '1h30m'", {timeout: '1h30m'}, {timeoutMs: 5_400_000}],
      ["timeout '10' means seconds", {timeout: '10'}, {timeoutMs: 10_000}],
    ]
    for (const [title, flags, expected] of cases) {
      it(title, () => {
        expect(sweepOptionsFrom({...defaults, ...flags})).to.include(expected)
      })
    }
  })

  describe('rejects invalid values with a UsageError (exit 2) naming the flag', () => {
    const cases: Array<[title: string, flags: Partial<RawSweepFlags>, mentions: string[]]> = [
      ['max-delete-ratio < 0', {'max-delete-ratio': -0.1}, ['--max-delete-ratio', '-0.1']],
      ['max-delete-ratio > 1', {'max-delete-ratio': 1.01}, ['--max-delete-ratio', '1.01']],
      ['max-delete-ratio NaN', {'max-delete-ratio': Number.NaN}, ['--max-delete-ratio', 'NaN']],
      ['max-delete-ratio Infinity', {'max-delete-ratio': Number.POSITIVE_INFINITY}, ['--max-delete-ratio']],
      ['list-size -1', {'list-size': -1}, ['--list-size', '-1', 'use 0 to list everything']],
      ['list-size 1.5', {'list-size': 1.5}, ['--list-size', '1.5']],
      ['list-size NaN', {'list-size': Number.NaN}, ['--list-size']],
      ['concurrency 0', {concurrency: 0}, ['--concurrency', '>= 1', 'got 0']],
      ['concurrency 2.5', {concurrency: 2.5}, ['--concurrency', '2.5']],
      ['burst 0', {burst: 0}, ['--burst', '>= 1', 'got 0']],
      ['burst -3', {burst: -3}, ['--burst', '-3']],
      ['qps 0', {qps: 0}, ['--qps', '> 0', 'got 0']],
      ['qps negative', {qps: -5}, ['--qps', '-5']],
      ['qps NaN', {qps: Number.NaN}, ['--qps', 'NaN']],
      ['qps Infinity', {qps: Number.POSITIVE_INFINITY}, ['--qps']],
      ['burst without qps', {burst: 10, qps: undefined}, ['--burst only applies with --qps']],
      ['fail-on-stale without dry-run', {'dry-run': false, 'fail-on-stale': true}, ['--fail-on-stale', '--dry-run']],
      ["timeout 'abc'", {timeout: 'abc'}, ['--timeout', '"abc"']],
      ["timeout ''", {timeout: ''}, ['--timeout']],
      ["timeout '-1s'", {timeout: '-1s'}, ['--timeout', '"-1s"']],
      ["timeout '5x'", {timeout: '5x'}, ['--timeout', '"5x"']],
      ["kinds ''", {kinds: ''}, ['--kinds', 'NodeFeature', 'NodeResourceTopology']],
      ["kinds ','", {kinds: ','}, ['--kinds', 'NodeFeature']],
      ["kinds ' , '", {kinds: ' , '}, ['--kinds']],
      ["kinds 'Foo'", {kinds: 'Foo'}, ['--kinds', '"Foo"', 'NodeFeature, NodeResourceTopology']],
      ["kinds 'NodeFeature,Foo'", {kinds: 'NodeFeature,Foo'}, ['--kinds', '"Foo"']],
    ]
    for (const [title, flags, mentions] of cases) {
      it(title, () => {
        const error = usageErrorFrom(() => sweepOptionsFrom({...defaults, ...flags}))
        expect(error.exitCode).to.equal(2)
        expect(error.oclif.exit).to.equal(2)
        for (const text of mentions) expect(error.message).to.include(text)
      })
    }
  })

  describe('--kinds parsing', () => {
    const nodeFeature = gcKinds[0]
    const topology = gcKinds[1]
    const cases: Array<[input: string, kinds: typeof gcKinds]> = [
      ['NodeFeature', [nodeFeature]],
      ['nodefeatures', [nodeFeature]],
      ['NodeResourceTopology', [topology]],
      ['nodefeatures,NodeResourceTopology', [nodeFeature, topology]],
      ['NodeResourceTopology,nodefeatures', [topology, nodeFeature]],
      [' nodefeatures , noderesourcetopologies ', [nodeFeature, topology]],
      ['nodefeatures,NodeFeature,nodefeatures.nfd.k8s-sigs.io', [nodeFeature]],
      ['NodeFeature,,NodeResourceTopology,', [nodeFeature, topology]],
      ['NodeResourceTopology,NodeFeature,noderesourcetopologies', [topology, nodeFeature]],
    ]
    for (const [input, kinds] of cases) {
      it(`${JSON.stringify(input)} -> ${kinds.map((k) => k.kind).join(',')}`, () => {
        const parsed = sweepOptionsFrom({...defaults, kinds: input}).kinds
        expect(parsed).to.have.length(kinds.length)
        for (const [i, k] of kinds.entries()) expect(parsed[i]).to.equal(k)
      })
    }

    it('defaults to every kind when --kinds is absent', () => {
      expect(sweepOptionsFrom(defaults).kinds).to.equal(gcKinds)
    })
  })
})
