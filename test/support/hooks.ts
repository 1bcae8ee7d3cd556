// Loaded by mocha (.mocharc.cjs "require"): at the end of the run, stops what the run started (the test node,
// then every control plane), each registered by the support module that started it (run-end.ts).
import {stopRegistered} from './run-end.js'

export async function mochaGlobalTeardown(): Promise<void> {
  await stopRegistered()
}
