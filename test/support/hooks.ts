// Loaded by mocha (.mocharc.cjs "require"): stops the test node and every control plane the run started.
import {stopAllControlPlanes} from './cluster.js'
import {stopTestNode} from './test-node.js'

export async function mochaGlobalTeardown(): Promise<void> {
  // The node first: kubelet must not outlive its control plane, and the host must be put back.
  await stopTestNode().finally(stopAllControlPlanes)
}
