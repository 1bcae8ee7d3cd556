import {expect} from 'chai'

import {labelKeyProblem, matchesLabelSelector} from '../../../src/lib/devices/label-selector.js'
import type {LabelSelector} from '../../../src/lib/devices/types.js'

const node = {'kubernetes.io/arch': 'arm64', 'kubernetes.io/hostname': 'edge-1', usb: 'true', zone: ''}

describe('matchesLabelSelector', () => {
  const cases: Array<[title: string, selector: LabelSelector | undefined, expected: boolean]> = [
    ['no selector selects every node', undefined, true],
    ['an empty selector selects every node', {}, true],
    ['empty matchLabels and matchExpressions select every node', {matchExpressions: [], matchLabels: {}}, true],
    ['matchLabels: equal value', {matchLabels: {usb: 'true'}}, true],
    ['matchLabels: every pair must hold', {matchLabels: {'kubernetes.io/arch': 'arm64', usb: 'false'}}, false],
    ['matchLabels: a missing key', {matchLabels: {gpu: 'true'}}, false],
    ['matchLabels: an empty value matches a label set to ""', {matchLabels: {zone: ''}}, true],
    ['matchLabels: an empty value does not match a missing label', {matchLabels: {rack: ''}}, false],
    ['In: value listed', {matchExpressions: [{key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64']}]}, true],
    ['In: value not listed', {matchExpressions: [{key: 'kubernetes.io/arch', operator: 'In', values: ['amd64']}]}, false],
    ['In: key absent', {matchExpressions: [{key: 'gpu', operator: 'In', values: ['true']}]}, false],
    ['In: no values (invalid) selects nothing', {matchExpressions: [{key: 'usb', operator: 'In', values: []}]}, false],
    ['NotIn: value listed', {matchExpressions: [{key: 'usb', operator: 'NotIn', values: ['true']}]}, false],
    ['NotIn: value not listed', {matchExpressions: [{key: 'usb', operator: 'NotIn', values: ['false']}]}, true],
    ['NotIn: key absent matches (Kubernetes semantics)', {matchExpressions: [{key: 'gpu', operator: 'NotIn', values: ['true']}]}, true],
    ['Exists: key present', {matchExpressions: [{key: 'usb', operator: 'Exists'}]}, true],
    ['Exists: key present with an empty value', {matchExpressions: [{key: 'zone', operator: 'Exists'}]}, true],
    ['Exists: key absent', {matchExpressions: [{key: 'gpu', operator: 'Exists'}]}, false],
    ['DoesNotExist: key absent', {matchExpressions: [{key: 'gpu', operator: 'DoesNotExist'}]}, true],
    ['DoesNotExist: key present', {matchExpressions: [{key: 'usb', operator: 'DoesNotExist'}]}, false],
    [
      'every expression must hold',
      {
        matchExpressions: [
          {key: 'usb', operator: 'Exists'},
          {key: 'gpu', operator: 'Exists'},
        ],
      },
      false,
    ],
    ['matchLabels and matchExpressions together', {matchExpressions: [{key: 'gpu', operator: 'DoesNotExist'}], matchLabels: {usb: 'true'}}, true],
    ['matchLabels holds but an expression does not', {matchExpressions: [{key: 'usb', operator: 'DoesNotExist'}], matchLabels: {usb: 'true'}}, false],
    ['a key named like an Object.prototype member is absent', {matchExpressions: [{key: 'constructor', operator: 'Exists'}]}, false],
    ['DoesNotExist for toString holds', {matchExpressions: [{key: 'toString', operator: 'DoesNotExist'}]}, true],
  ]
  for (const [title, selector, expected] of cases) {
    it(title, () => {
      expect(matchesLabelSelector(selector, node)).to.equal(expected)
    })
  }

  it('selects nothing but an unlabelled node with DoesNotExist, and everything with no selector', () => {
    expect(matchesLabelSelector({matchLabels: {usb: 'true'}}, {})).to.equal(false)
    expect(matchesLabelSelector({matchExpressions: [{key: 'usb', operator: 'DoesNotExist'}]}, {})).to.equal(true)
    expect(matchesLabelSelector(undefined, {})).to.equal(true)
  })
})

describe('label syntax', () => {
  const keys: Array<[key: string, valid: boolean]> = [
    ['usb', true],
    ['kubernetes.io/arch', true],
    ['node-role.kubernetes.io/edge', true],
    ['A_b.c-9', true],
    ['a'.repeat(63), true],
    [`${'a'.repeat(253)}/x`, true],
    ['', false],
    ['a'.repeat(64), false],
    [`${'a'.repeat(254)}/x`, false],
    ['-a', false],
    ['a_', false],
    ['a b', false],
    ['/a', false],
    ['a/', false],
    ['a/b/c', false],
    ['Example.com/a', false],
    ['example..com/a', false],
  ]
  for (const [key, valid] of keys) {
    it(`label key ${JSON.stringify(key.length > 20 ? `${key.slice(0, 12)}...(${key.length})` : key)} is ${valid ? 'valid' : 'invalid'}`, () => {
      expect(labelKeyProblem(key) === undefined).to.equal(valid)
    })
  }
})
