import {expect} from 'chai'

import {agentOptionsFrom, type RawAgentFlags} from '../../../src/lib/agent/agent-options.js'

const defaults: RawAgentFlags = {
  'batch-max-wait': '1s',
  'batch-quiet': '0s',
  'cdi-dir': '/var/run/cdi',
  'cgroup-mode': 'auto',
  'containerd-address': '/run/containerd/containerd.sock',
  'containerd-namespace': 'k8s.io',
  'kubelet-dir': '/var/lib/kubelet',
  'log-level': 'info',
  'metrics-port': 0,
  'plugin-dir': '/var/lib/kubelet/device-plugins',
  'pod-resources-socket': '/var/lib/kubelet/pod-resources/kubelet.sock',
  'state-dir': '/var/lib/nfdctl/agent',
  'udev-data-dir': '/run/udev/data',
  workers: 4,
}
const host = {env: {}, hostname: 'worker-7'}

describe('agentOptionsFrom', function () {
  it('turns the defaults into the documented options', function () {
    expect(agentOptionsFrom(defaults, false, host)).to.deep.equal({
      cgroupMode: 'auto',
      logFormat: 'json',
      logLevel: 'info',
      maxWaitMs: 1000,
      metricsPort: 0,
      nodeName: 'worker-7',
      quietMs: 0,
      workers: 4,
    })
  })

  it('names the node from --node-name, then $NODE_NAME, then the hostname; an empty $NODE_NAME is not set', function () {
    const cases: Array<[Partial<RawAgentFlags>, Record<string, string>, string]> = [
      [{'node-name': 'flagged'}, {NODE_NAME: 'from-env'}, 'flagged'],
      [{}, {NODE_NAME: 'from-env'}, 'from-env'],
      [{}, {NODE_NAME: ''}, 'worker-7'],
      [{}, {}, 'worker-7'],
    ]
    for (const [flags, env, expected] of cases) expect(agentOptionsFrom({...defaults, ...flags}, false, {env, hostname: 'worker-7'}).nodeName).to.equal(expected)
  })

  it('--batch-quiet is off by default and takes a minimum delay when given', function () {
    expect(agentOptionsFrom({...defaults, 'batch-quiet': '50ms'}, false, host).quietMs).to.equal(50)
  })

  const bad: Array<[string, Partial<RawAgentFlags>, {hostname?: string}, RegExp]> = [
    ['a negative quiet window', {'batch-quiet': '-1s'}, {}, /^--batch-quiet must be a duration such as 0s \(off\), 50ms or 1s, got "-1s"$/],
    ['a zero max wait', {'batch-max-wait': '0s'}, {}, /^--batch-max-wait must be a positive duration such as 200ms or 1s, got "0s"$/],
    ['a malformed max wait', {'batch-max-wait': 'soon'}, {}, /^--batch-max-wait must be a positive duration/],
    ['a max wait shorter than the quiet window', {'batch-max-wait': '100ms', 'batch-quiet': '200ms'}, {}, /^--batch-max-wait \(100ms\) must be at least --batch-quiet \(200ms\)$/],
    ['a quiet window longer than a timer can wait', {'batch-max-wait': '1000h', 'batch-quiet': '1000h'}, {}, /^--batch-quiet must be at most 596h/],
    ['no workers', {workers: 0}, {}, /^--workers must be a whole number from 1 to 64, got 0$/],
    ['an unknown cgroup mode', {'cgroup-mode': 'v3'}, {}, /^--cgroup-mode must be one of auto, v1, v2, got "v3"$/],
    ['an empty state dir', {'state-dir': ' '}, {}, /^--state-dir must not be empty; leave it out for its default$/],
    [
      'a hostname that is no Node name',
      {},
      {hostname: 'Worker_7'},
      /^the node name "Worker_7" is not a valid Node name \(lower-case DNS subdomain\); pass the Node's name with --node-name or \$NODE_NAME$/,
    ],
  ]
  for (const [name, flags, sources, message] of bad) {
    it(`refuses ${name} with one line`, function () {
      expect(() => agentOptionsFrom({...defaults, ...flags}, false, {...host, ...sources})).to.throw(message)
    })
  }
})
