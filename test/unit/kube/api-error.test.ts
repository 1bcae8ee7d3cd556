import {expect} from 'chai'

import {NfdctlError} from '../../../src/lib/errors.js'
import {classifyStatus, isStatus, KubeApiError, type StatusClass} from '../../../src/lib/kube/api-error.js'

describe('classifyStatus', () => {
  const cases: Array<[code: number, statusClass: StatusClass]> = [
    [400, 'BadRequest'],
    [401, 'Unauthorized'],
    [403, 'Forbidden'],
    [404, 'NotFound'],
    [409, 'Conflict'],
    [410, 'Gone'],
    [422, 'Invalid'],
    [429, 'TooManyRequests'],
    [500, 'Unavailable'],
    [502, 'Unavailable'],
    [503, 'Unavailable'],
    [504, 'Unavailable'],
    [418, 'Other'],
    [501, 'Other'],
    [200, 'Other'],
    [0, 'Other'],
  ]
  for (const [code, statusClass] of cases) {
    it(`${code} -> ${statusClass}`, () => {
      expect(classifyStatus(code)).to.equal(statusClass)
    })
  }
})

describe('KubeApiError', () => {
  const notFoundBody = JSON.stringify({
    apiVersion: 'v1',
    code: 404,
    details: {group: 'nfd.k8s-sigs.io', kind: 'nodefeatures', name: 'nf-a'},
    kind: 'Status',
    message: 'nodefeatures.nfd.k8s-sigs.io "nf-a" not found',
    metadata: {},
    reason: 'NotFound',
    status: 'Failure',
  })

  describe('fromResponse', () => {
    it('reads message and reason from a Kubernetes Status body', () => {
      const err = KubeApiError.fromResponse('DELETE', '/apis/x/nf-a', 404, notFoundBody)
      expect(err.serverMessage).to.equal('nodefeatures.nfd.k8s-sigs.io "nf-a" not found')
      expect(err.reason).to.equal('NotFound')
      expect(err.code).to.equal(404)
      expect(err.method).to.equal('DELETE')
      expect(err.path).to.equal('/apis/x/nf-a')
      expect(err.statusClass).to.equal('NotFound')
      expect(err.retryAfterSeconds).to.equal(undefined)
    })

    it('builds a one-line message with method, path, code, reason and server message', () => {
      const err = KubeApiError.fromResponse('DELETE', '/apis/x/nf-a', 404, notFoundBody)
      expect(err.message).to.equal('DELETE /apis/x/nf-a: 404 NotFound: nodefeatures.nfd.k8s-sigs.io "nf-a" not found')
    })

    it('is an NfdctlError with exit code 1', () => {
      const err = KubeApiError.fromResponse('GET', '/api/v1/nodes', 500, '{}')
      expect(err).to.be.instanceOf(NfdctlError)
      expect(err).to.be.instanceOf(Error)
      expect(err.exitCode).to.equal(1)
      expect(err.oclif.exit).to.equal(1)
      expect(err.name).to.equal('KubeApiError')
    })

    it('tolerates a non-JSON body and keeps the raw text, trimmed', () => {
      const err = KubeApiError.fromResponse('GET', '/api/v1/nodes', 502, '  <html><body>Bad Gateway</body></html>\n')
      expect(err.serverMessage).to.equal('<html><body>Bad Gateway</body></html>')
      expect(err.reason).to.equal(undefined)
      expect(err.statusClass).to.equal('Unavailable')
      expect(err.message).to.include('502').and.include('Bad Gateway')
    })

    it('cuts a long non-JSON body to 300 characters', () => {
      const err = KubeApiError.fromResponse('GET', '/x', 500, 'y'.repeat(1000))
      expect(err.serverMessage).to.equal('y'.repeat(300))
    })

    it('keeps the raw text when the JSON body has no message', () => {
      const err = KubeApiError.fromResponse('GET', '/x', 409, '{"reason":"AlreadyExists"}')
      expect(err.serverMessage).to.equal('{"reason":"AlreadyExists"}')
      expect(err.reason).to.equal('AlreadyExists')
      expect(err.statusClass).to.equal('Conflict')
    })

    it('tolerates JSON that is not an object', () => {
      for (const body of ['null', '42', '"text"', '[]']) {
        const err = KubeApiError.fromResponse('GET', '/x', 500, body)
        expect(err.serverMessage, body).to.equal(body)
        expect(err.reason, body).to.equal(undefined)
      }
    })

    it('tolerates an empty body', () => {
      const err = KubeApiError.fromResponse('GET', '/x', 503, '')
      expect(err.serverMessage).to.equal('')
      expect(err.message.startsWith('GET /x: 503')).to.equal(true)
    })

    describe('Retry-After', () => {
      const cases: Array<[header: string | undefined, seconds: number | undefined]> = [
        ['5', 5],
        ['0', 0],
        ['120', 120],
        [undefined, undefined],
        ['soon', undefined],
        ['', undefined],
        ['Wed, 21 Oct 2015 07:28:00 GMT', undefined],
      ]
      for (const [header, seconds] of cases) {
        it(`${JSON.stringify(header)} -> ${seconds}`, () => {
          const err = KubeApiError.fromResponse('GET', '/x', 429, '{"message":"slow down","reason":"TooManyRequests"}', header)
          expect(err.retryAfterSeconds).to.equal(seconds)
          expect(err.statusClass).to.equal('TooManyRequests')
        })
      }
    })
  })

  describe('message formatting without a reason', () => {
    // Cosmetic: with no Status reason the message reads "GET /x: 404 : text" (a space before the colon)
    // and ends with a space when the body is empty.
    it('has no space before the colon when there is no reason', () => {
      const err = KubeApiError.fromResponse('GET', '/x', 404, 'not here')
      expect(err.message).to.not.include(' :')
      expect(err.message).to.match(/^GET \/x: 404:? not here$/)
    })

    it('has no trailing whitespace when there is neither reason nor message', () => {
      const err = KubeApiError.fromResponse('GET', '/x', 404, '')
      expect(err.message).to.equal(err.message.trimEnd())
    })
  })
})

describe('isStatus', () => {
  const gone = new KubeApiError('GET', '/x', 410, 'too old', undefined, 'Expired')
  const cases: Array<[title: string, err: unknown, statusClass: StatusClass, expected: boolean]> = [
    ['matching class', gone, 'Gone', true],
    ['other class', gone, 'NotFound', false],
    ['plain Error', new Error('Gone'), 'Gone', false],
    ['look-alike object', {code: 410, statusClass: 'Gone'}, 'Gone', false],
    ['undefined', undefined, 'Gone', false],
    ['a string', 'Gone', 'Gone', false],
  ]
  for (const [title, err, statusClass, expected] of cases) {
    it(`${title} -> ${expected}`, () => {
      expect(isStatus(err, statusClass)).to.equal(expected)
    })
  }
})
