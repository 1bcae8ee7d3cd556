import {expect} from 'chai'

import {nfdctl} from '../../support/run-cli.js'

// The three long-running commands share --metrics-bind-address and --metrics-port: each checks them before it
// contacts anything (no cluster, no containerd, no socket) and says what is wrong in one line, exit 2.
describe('--metrics-bind-address on every long-running command: bad input', function () {
  const commands: Array<[string, string[]]> = [
    ['gc run', ['gc', 'run', '--kubeconfig', '/nonexistent/kubeconfig']],
    ['devices agent', ['devices', 'agent', '--kubeconfig', '/nonexistent/kubeconfig', '--node-name', 'worker-1']],
    ['plugins serve', ['plugins', 'serve', '--kubeconfig', '/nonexistent/kubeconfig', '--plugin-dir', '/nonexistent/plugins']],
  ]
  const cases: Array<[string, string[], RegExp]> = [
    [
      'both flags',
      ['--metrics-bind-address', '127.0.0.1:8080', '--metrics-port', '8080'],
      /^--metrics-bind-address and --metrics-port cannot be given together; use --metrics-bind-address alone \(--metrics-port 8080 is short for --metrics-bind-address :8080\)$/,
    ],
    [
      'an address without a port',
      ['--metrics-bind-address', '127.0.0.1'],
      /^--metrics-bind-address must be host:port \(127\.0\.0\.1:8080, \[::1\]:8080, :8080 for every address\) or 0 to disable; "127\.0\.0\.1" has no port$/,
    ],
    ['an IPv6 address without brackets', ['--metrics-bind-address', '::1:8080'], /^--metrics-bind-address must be .*; "::1:8080" needs brackets around the IPv6 address and a port$/],
    ['a port out of range', ['--metrics-bind-address', '0.0.0.0:99999'], /"0\.0\.0\.0:99999" has port 99999, not one from 1 to 65535$/],
    ['--metrics-port out of range', ['--metrics-port', '70000'], /^--metrics-port must be a port from 1 to 65535, or 0 to disable, got 70000$/],
  ]
  for (const [command, argv] of commands) {
    for (const [name, args, message] of cases) {
      it(`${command}: ${name}: exit 2 with one line`, async function () {
        const run = await nfdctl([...argv, ...args])
        expect(run.exitCode).to.equal(2)
        expect(run.error?.message).to.match(message)
        expect(run.error?.message).to.not.contain('\n')
      })
    }
  }

  it('gc run: a valid address passes the flag checks (then the missing kubeconfig is what stops it)', async function () {
    for (const address of ['127.0.0.1:8080', ':8080', '[::1]:8080', '0']) {
      const run = await nfdctl(['gc', 'run', '--kubeconfig', '/nonexistent/kubeconfig', '--metrics-bind-address', address])
      expect(run.exitCode, address).to.equal(2)
      expect(run.error?.message, address).to.equal('kubeconfig /nonexistent/kubeconfig does not exist; pass an existing file with --kubeconfig')
    }
  })

  it('--help shows both flags and what --metrics-port stands for', async function () {
    const run = await nfdctl(['gc', 'run', '--help'])
    expect(run.stdout).to.match(/--metrics-bind-address=<value>\s+host:port of \/metrics, \/healthz and \/readyz/)
    expect(run.stdout).to.match(/--metrics-port=<value>\s+short for --metrics-bind-address :<port>/)
  })
})
