import {expect} from 'chai'

import {formatDurationMs, parseDurationMs} from '../../src/lib/duration.js'

describe('parseDurationMs', () => {
  const valid: Array<[text: string, ms: number]> = [
    ['0', 0],
    ['0s', 0],
    ['10', 10_000],
    ['1.5', 1500],
    ['45s', 45_000],
    ['90s', 90_000],
    ['250ms', 250],
    ['1.5s', 1500],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['1h2m3s4ms', 3_723_004],
    ['1m500ms', 60_500],
    ['0.5h', 1_800_000],
    ['1.5ms', 2],
    ['  45s  ', 45_000],
  ]
  for (const [text, ms] of valid) {
    it(`${JSON.stringify(text)} -> ${ms}`, () => {
      expect(parseDurationMs(text)).to.equal(ms)
    })
  }

  const invalid = ['', '   ', 'abc', '5x', '-1s', '-1', '+1s', 's', 'ms', '1.s', '.5s', '1,5s', '1 s', '5m30', '1e3', '1d', '1H', 'Infinity', 'NaN', '1s abc']
  for (const text of invalid) {
    it(`${JSON.stringify(text)} -> undefined`, () => {
      expect(parseDurationMs(text)).to.equal(undefined)
    })
  }
})

describe('formatDurationMs', () => {
  const cases: Array<[ms: number, text: string]> = [
    [0, '0ms'],
    [1, '1ms'],
    [250, '250ms'],
    [999, '999ms'],
    [999.4, '999ms'],
    [1000, '1.00s'],
    [1234, '1.23s'],
    [9990, '9.99s'],
    [10_000, '10.0s'],
    [45_000, '45.0s'],
    [59_900, '59.9s'],
    [60_000, '1m0s'],
    [90_000, '1m30s'],
    [61_400, '1m1s'],
    [61_500, '1m2s'],
    [3_599_000, '59m59s'],
    [3_600_000, '60m0s'],
  ]
  for (const [ms, text] of cases) {
    it(`${ms} -> ${text}`, () => {
      expect(formatDurationMs(ms)).to.equal(text)
    })
  }

  // Rounding must not carry a unit over its limit: no "60s" in the minutes form, no "1000ms", no "60.0s".
  const carries: Array<[ms: number, text: string]> = [
    [119_500, '2m0s'],
    [119_999, '2m0s'],
    [59_999, '1m0s'],
    [999.6, '1.00s'],
  ]
  for (const [ms, text] of carries) {
    it(`${ms} -> ${text} (rounding carries into the next unit)`, () => {
      expect(formatDurationMs(ms)).to.equal(text)
    })
  }
})
