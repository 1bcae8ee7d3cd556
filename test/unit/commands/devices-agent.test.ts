import {expect} from 'chai'

import {nfdctl} from '../../support/run-cli.js'

// Flags are checked before anything starts (no cluster, no containerd, no socket): one line, exit 2.
describe('devices agent: bad input', function () {
  const cases: Array<[string, string[], RegExp]> = [
    ['a malformed --batch-quiet', ['--batch-quiet', 'fast'], /^--batch-quiet must be a duration such as 0s \(off\), 50ms or 1s, got "fast"$/],
    ['--batch-max-wait under --batch-quiet', ['--batch-quiet', '2s', '--batch-max-wait', '1s'], /^--batch-max-wait \(1s\) must be at least --batch-quiet \(2s\)$/],
    ['too many --workers', ['--workers', '100'], /^--workers must be a whole number from 1 to 64, got 100$/],
    ['an unknown --cgroup-mode', ['--cgroup-mode', 'v3'], /^Expected --cgroup-mode=v3 to be one of: auto, v1, v2/],
    ['--metrics-port out of range', ['--metrics-port', '70000'], /^--metrics-port must be a port from 1 to 65535, or 0 to disable, got 70000$/],
    ['an invalid --node-name', ['--node-name', 'Node_1'], /^the node name "Node_1" is not a valid Node name/],
    ['an empty --kubelet-dir', ['--dra', '--kubelet-dir', ' '], /^Flag --kubelet-dir expects a value$/],
  ]
  for (const [name, args, message] of cases) {
    it(`${name}: exit 2 with one line`, async function () {
      const run = await nfdctl(['devices', 'agent', '--kubeconfig', '/nonexistent/kubeconfig', ...(args.includes('--node-name') ? [] : ['--node-name', 'worker-1']), ...args])
      expect(run.exitCode).to.equal(2)
      expect(run.error?.message).to.match(message)
      expect(run.error?.message).to.not.contain('\n')
    })
  }

  it('a missing kubeconfig is reported after the flags are valid', async function () {
    const run = await nfdctl(['devices', 'agent', '--kubeconfig', '/nonexistent/kubeconfig', '--node-name', 'worker-1'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.equal('kubeconfig /nonexistent/kubeconfig does not exist; pass an existing file with --kubeconfig')
  })
})
