import {expect} from 'chai'

import {observeOptionsFrom, type ObserveOptions, type RawObserveFlags} from '../../../src/lib/observe/observe-options.js'
import {usageErrorFrom} from '../../support/thrown.js'

const base: RawObserveFlags = {'log-format': 'json', 'log-level': 'info'}

describe('observeOptionsFrom: where /metrics, /healthz and /readyz listen', () => {
  const good: Array<[string, Partial<RawObserveFlags>, Pick<ObserveOptions, 'metricsHost' | 'metricsPort'>]> = [
    ['neither flag: every address, port 8080', {}, {metricsPort: 8080}],
    ['--metrics-port 9090: every address', {'metrics-port': 9090}, {metricsPort: 9090}],
    ['--metrics-port 0 disables', {'metrics-port': 0}, {metricsPort: 0}],
    ['IPv4 loopback', {'metrics-bind-address': '127.0.0.1:8080'}, {metricsHost: '127.0.0.1', metricsPort: 8080}],
    ['every address', {'metrics-bind-address': ':9443'}, {metricsPort: 9443}],
    ['0 disables, as controller-runtime', {'metrics-bind-address': '0'}, {metricsPort: 0}],
    ['IPv6 in brackets', {'metrics-bind-address': '[::1]:8080'}, {metricsHost: '::1', metricsPort: 8080}],
    ['IPv6 any', {'metrics-bind-address': '[::]:8080'}, {metricsHost: '::', metricsPort: 8080}],
    ['a DNS name', {'metrics-bind-address': 'localhost:8080'}, {metricsHost: 'localhost', metricsPort: 8080}],
    ['the highest port', {'metrics-bind-address': '127.0.0.7:65535'}, {metricsHost: '127.0.0.7', metricsPort: 65_535}],
  ]
  for (const [name, flags, want] of good) {
    it(name, () => {
      const got = observeOptionsFrom({...base, ...flags}, false)
      expect({metricsHost: got.metricsHost, metricsPort: got.metricsPort}).to.deep.equal({metricsHost: undefined, ...want})
      // Absent, not undefined: options compared whole elsewhere keep their shape.
      if (want.metricsHost === undefined) expect(got).to.not.have.property('metricsHost')
    })
  }

  const usage = 'must be host:port (127.0.0.1:8080, [::1]:8080, :8080 for every address) or 0 to disable;'
  const bad: Array<[string, Partial<RawObserveFlags>, string]> = [
    [
      'both flags',
      {'metrics-bind-address': '127.0.0.1:8080', 'metrics-port': 8080},
      '--metrics-bind-address and --metrics-port cannot be given together; use --metrics-bind-address alone (--metrics-port 8080 is short for --metrics-bind-address :8080)',
    ],
    ['both flags, one of them disabling', {'metrics-bind-address': '0', 'metrics-port': 0}, '--metrics-bind-address and --metrics-port cannot be given together'],
    ['no port', {'metrics-bind-address': '127.0.0.1'}, `--metrics-bind-address ${usage} "127.0.0.1" has no port`],
    ['empty', {'metrics-bind-address': ''}, `--metrics-bind-address ${usage} "" has no port`],
    ['a bare port', {'metrics-bind-address': '8080'}, `--metrics-bind-address ${usage} "8080" has no port`],
    ['port 0 in an address', {'metrics-bind-address': '127.0.0.1:0'}, '"127.0.0.1:0" has port 0, not one from 1 to 65535'],
    ['port too high', {'metrics-bind-address': ':65536'}, '":65536" has port 65536, not one from 1 to 65535'],
    ['port not a number', {'metrics-bind-address': 'localhost:http'}, '"localhost:http" is not host:port'],
    ['IPv6 without brackets', {'metrics-bind-address': '::1'}, '"::1" needs brackets around the IPv6 address and a port'],
    ['IPv6 without brackets, port appended', {'metrics-bind-address': 'fe80::1:8080'}, '"fe80::1:8080" needs brackets'],
    ['not IPv6 in brackets', {'metrics-bind-address': '[127.0.0.1]:8080'}, 'has "127.0.0.1" in brackets, which is not an IPv6 address'],
    ['a mistyped IPv4 address', {'metrics-bind-address': '127.0.0.256:8080'}, 'has host "127.0.0.256", which is neither an IP address nor a DNS name'],
    ['a URL', {'metrics-bind-address': 'http://127.0.0.1:8080'}, '"http://127.0.0.1:8080" is not host:port'],
    ['a host with a space', {'metrics-bind-address': 'local host:8080'}, 'has host "local host"'],
    ['--metrics-port out of range', {'metrics-port': 70_000}, '--metrics-port must be a port from 1 to 65535, or 0 to disable, got 70000'],
  ]
  for (const [name, flags, message] of bad) {
    it(`refuses ${name} in one line`, () => {
      const error = usageErrorFrom(() => observeOptionsFrom({...base, ...flags}, false))
      expect(error.message).to.include(message)
      expect(error.message).to.not.include('\n')
      expect(error.exitCode).to.equal(2)
    })
  }
})
