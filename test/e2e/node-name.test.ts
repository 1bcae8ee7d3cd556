import {expect} from 'chai'

import {nodeNameSources, setNodeName, useNodeRecordingServer} from '../support/node-name.js'
import {nfdctl} from '../support/run-cli.js'

// devices list names the node as plugins serve and devices agent do (test/unit/commands/node-name.test.ts):
// --node-name, then $NODE_NAME, then the hostname. It lists this machine's devices, so it runs here. A loopback
// API server with no DeviceClasses and no Nodes records which Node it reads.
describe('devices list names the node as the other device commands do', function () {
  const recording = useNodeRecordingServer()

  for (const [name, args, env, expected] of nodeNameSources) {
    it(`devices list: ${name}`, async function () {
      setNodeName(env)
      const run = await nfdctl(['devices', 'list', '--json', '--kubeconfig', recording().kubeconfig, ...args])
      expect(run.exitCode, run.stdout).to.equal(0)
      expect(recording().nodesRead).to.deep.equal([expected])
      expect(run.stderr).to.contain(`Node ${expected} is not in the cluster`)
    })
  }
})
