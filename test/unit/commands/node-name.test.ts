import {expect} from 'chai'

import {nodeNameSources, setNodeName, useNodeRecordingServer} from '../../support/node-name.js'
import {nfdctl} from '../../support/run-cli.js'

// plugins serve and devices agent name the node as devices list does (test/e2e/node-name.test.ts, as it reads
// this machine's /sys): --node-name, then $NODE_NAME, then the hostname. A loopback API server with no
// DeviceClasses and no Nodes records which Node each command reads.
describe('the device commands name the node alike', function () {
  const recording = useNodeRecordingServer()

  for (const [name, args, env, expected] of nodeNameSources) {
    it(`plugins serve: ${name}`, async function () {
      setNodeName(env)
      const run = await nfdctl(['plugins', 'serve', '--kubeconfig', recording().kubeconfig, '--metrics-port', '0', '--log-level', 'error', ...args])
      expect(run.exitCode).to.equal(2)
      expect(recording().nodesRead).to.deep.equal([expected])
      expect(run.error?.message).to.equal(`no DeviceClass applies to node ${expected}: create one (kubectl apply) or give --class-file`)
    })
  }

  it('devices agent: $NODE_NAME without --node-name', async function () {
    setNodeName('Not_A_Node')
    const run = await nfdctl(['devices', 'agent', '--kubeconfig', recording().kubeconfig])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^the node name "Not_A_Node" is not a valid Node name/)
  })

  it('devices agent: --node-name over $NODE_NAME', async function () {
    setNodeName('worker-1')
    const run = await nfdctl(['devices', 'agent', '--kubeconfig', recording().kubeconfig, '--node-name', 'Not_A_Node'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^the node name "Not_A_Node" is not a valid Node name/)
  })
})
