// Loaded by mocha (.mocharc.json "require"): stops every control plane the run started.
import {stopAllControlPlanes} from './cluster.js'

export async function mochaGlobalTeardown(): Promise<void> {
  await stopAllControlPlanes()
}
