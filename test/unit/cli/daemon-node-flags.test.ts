import {expect} from 'chai'

import {daemonNodeFlags, daemonRelaunchArgs} from '../../../src/cli/daemon-node-flags.js'

const node = '/usr/bin/node'
const script = '/usr/lib/node_modules/nfdctl/bin/run.js'
const shebang = ['--max-semi-space-size=4']

describe('the Node flags a daemon command starts again with', () => {
  it('starts each daemon again with the flags after the ones it has, its script and arguments unchanged', () => {
    expect([...daemonNodeFlags.keys()]).to.deep.equal(['gc run', 'devices agent', 'plugins serve'])
    for (const [id, flags] of daemonNodeFlags) {
      const argv = [node, script, ...id.split(' '), '--kubeconfig', '/k', '-v']
      expect(daemonRelaunchArgs(argv, shebang, {}), id).to.deep.equal([...shebang, ...flags, script, ...id.split(' '), '--kubeconfig', '/k', '-v'])
    }
    expect(daemonNodeFlags.get('gc run'), 'gc run: memory first').to.include('--lite-mode')
    expect(daemonNodeFlags.get('devices agent'), 'the agent: hot-plug latency first').to.not.include('--lite-mode')
  })

  it('does not start a daemon again once its flags are on the command line, so it cannot loop', () => {
    const argv = [node, script, 'gc', 'run']
    const relaunch = daemonRelaunchArgs(argv, shebang, {})
    expect(relaunch).to.not.equal(undefined)
    const second = relaunch!.slice(0, relaunch!.indexOf(script))
    expect(daemonRelaunchArgs([node, ...relaunch!.slice(relaunch!.indexOf(script))], second, {})).to.equal(undefined)
  })

  it('leaves one-shot commands, help and partial command lines as they are', () => {
    for (const args of [['gc', 'once'], ['devices', 'list'], ['gc'], ['version'], ['run', 'gc'], ['help', 'gc', 'run'], ['gc', '--help'], []]) {
      expect(daemonRelaunchArgs([node, script, ...args], shebang, {}), args.join(' ')).to.equal(undefined)
    }
  })

  it("adds only the flags the command line lacks, and takes the operator's own from NFDCTL_DAEMON_NODE_FLAGS", () => {
    const argv = [node, script, 'devices', 'agent']
    expect(daemonRelaunchArgs(argv, ['--no-opt'], {})).to.deep.equal(['--no-opt', ...daemonNodeFlags.get('devices agent')!.filter((f) => f !== '--no-opt'), script, 'devices', 'agent'])
    expect(daemonRelaunchArgs(argv, [], {NFDCTL_DAEMON_NODE_FLAGS: ' --max-old-space-size=96  --no-opt '})).to.deep.equal(['--max-old-space-size=96', '--no-opt', script, 'devices', 'agent'])
    expect(daemonRelaunchArgs(argv, [], {NFDCTL_DAEMON_NODE_FLAGS: ''}), 'empty: as started').to.equal(undefined)
  })

  it('refuses a setting that would put something other than flags on Node’s command line', () => {
    for (const setting of ['lite-mode', '--lite-mode /tmp/evil.js', '-e', '--require=x y', '--a;b']) {
      expect(() => daemonRelaunchArgs([node, script, 'gc', 'run'], [], {NFDCTL_DAEMON_NODE_FLAGS: setting}), setting).to.throw(/NFDCTL_DAEMON_NODE_FLAGS holds ".+", which is not a Node or V8 flag/)
    }
  })
})
