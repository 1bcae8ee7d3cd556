import {expect} from 'chai'

import {decideLease, microTime, type LeaseRecord} from '../../../src/lib/kube/lease-decision.js'

const me = 'pod-a_1234'
const other = 'pod-b_5678'
const seen = 1_000_000 // when we last saw the record change, on our clock

describe('decideLease', () => {
  const cases: Array<[title: string, record: LeaseRecord | undefined, nowMs: number, decision: ReturnType<typeof decideLease>]> = [
    ['no Lease yet', undefined, seen, 'create'],
    ['no Lease yet, long after', undefined, seen + 3_600_000, 'create'],
    ['we hold it', {holderIdentity: me, leaseDurationSeconds: 15}, seen, 'renew'],
    ['we hold it, even past expiry', {holderIdentity: me, leaseDurationSeconds: 15}, seen + 60_000, 'renew'],
    ['holder released (empty string)', {holderIdentity: '', leaseDurationSeconds: 15}, seen, 'acquire'],
    ['no holder field', {leaseDurationSeconds: 15}, seen, 'acquire'],
    ['empty spec', {}, seen, 'acquire'],
    ['other holder, just observed', {holderIdentity: other, leaseDurationSeconds: 15}, seen, 'wait'],
    ['other holder, 1 ms before expiry', {holderIdentity: other, leaseDurationSeconds: 15}, seen + 14_999, 'wait'],
    ['other holder, exactly at expiry', {holderIdentity: other, leaseDurationSeconds: 15}, seen + 15_000, 'acquire'],
    ['other holder, long expired', {holderIdentity: other, leaseDurationSeconds: 15}, seen + 600_000, 'acquire'],
    ['other holder, 40 s lease, 39.999 s later', {holderIdentity: other, leaseDurationSeconds: 40}, seen + 39_999, 'wait'],
    ['other holder, 40 s lease, 40 s later', {holderIdentity: other, leaseDurationSeconds: 40}, seen + 40_000, 'acquire'],
    ['other holder, 1 s lease, 999 ms later', {holderIdentity: other, leaseDurationSeconds: 1}, seen + 999, 'wait'],
    ['other holder, 1 s lease, 1 s later', {holderIdentity: other, leaseDurationSeconds: 1}, seen + 1000, 'acquire'],
    ['other holder, no duration: 15 s default, 14.999 s later', {holderIdentity: other}, seen + 14_999, 'wait'],
    ['other holder, no duration: 15 s default, 15 s later', {holderIdentity: other}, seen + 15_000, 'acquire'],
    ['other holder, clock before observation (skew)', {holderIdentity: other, leaseDurationSeconds: 15}, seen - 5000, 'wait'],
    ['identity match is exact (case)', {holderIdentity: me.toUpperCase(), leaseDurationSeconds: 15}, seen, 'wait'],
    ['identity match is exact (prefix)', {holderIdentity: 'pod-a', leaseDurationSeconds: 15}, seen, 'wait'],
  ]
  for (const [title, record, nowMs, decision] of cases) {
    it(`${title} → ${decision}`, () => {
      expect(decideLease(record, seen, me, nowMs)).to.equal(decision)
    })
  }

  it('ignores leaseTransitions', () => {
    for (const leaseTransitions of [0, 1, 99]) {
      expect(decideLease({holderIdentity: other, leaseDurationSeconds: 15, leaseTransitions}, seen, me, seen + 1)).to.equal('wait')
    }
  })

  it('judges expiry from observedAt, so a newer observation delays takeover', () => {
    const record: LeaseRecord = {holderIdentity: other, leaseDurationSeconds: 15}
    const now = seen + 20_000
    expect(decideLease(record, seen, me, now)).to.equal('acquire')
    expect(decideLease(record, seen + 10_000, me, now)).to.equal('wait')
  })
})

describe('microTime', () => {
  const format = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/
  const cases: Array<[ms: number, text: string]> = [
    [0, '1970-01-01T00:00:00.000000Z'],
    [1, '1970-01-01T00:00:00.001000Z'],
    [999, '1970-01-01T00:00:00.999000Z'],
    [Date.UTC(2026, 11, 2, 13, 0, 0, 123), '2026-12-02T13:00:00.123000Z'],
    [Date.UTC(2024, 1, 29, 23, 59, 59, 990), '2024-02-29T23:59:59.990000Z'],
  ]
  for (const [ms, text] of cases) {
    it(`${ms} → ${text}`, () => {
      const result = microTime(ms)
      expect(result).to.equal(text)
      expect(result).to.match(format)
      expect(Date.parse(result)).to.equal(ms)
    })
  }

  it('always has exactly six fractional digits and a trailing Z, and round-trips', () => {
    const start = Date.UTC(2030, 0, 1)
    for (let i = 0; i < 2000; i += 7) {
      const ms = start + i * 1_000_003
      const text = microTime(ms)
      expect(text, String(ms)).to.match(format)
      expect(text.split('.')[1]).to.have.length(7) // 6 digits + Z
      expect(Date.parse(text), text).to.equal(ms)
    }
  })
})
