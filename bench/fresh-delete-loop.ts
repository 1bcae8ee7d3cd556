// bench:gc's plain DELETE loop in a fresh process: the CLI's own client, bundled as the package bundles
// it (setup.ts builds this file with esbuild from the same checkout as the packed CLI, whose dist/ holds
// only the bundle), started with the CLI's Node flags and V8 settings, sends plain DELETEs for the paths
// on stdin, 64 in flight (its CPU time and phases are written by report-process.cjs). The ceiling is the
// faster of this and the same loop in the benchmark's warm process.
// Usage: node <flags> fresh-delete-loop.mjs <kubeconfig> < paths
import {readFileSync} from 'node:fs'

import {openCluster} from '../src/lib/kube/connect.js'
import {holdMemoryDown} from '../src/lib/memory.js'

// The V8 settings every command sets as it starts (no TurboFan among them), so the loop's client runs as
// gc once's does.
holdMemoryDown()
const [kubeconfig] = process.argv.slice(2)
const paths = readFileSync(0, 'utf8').split('\n').filter(Boolean)
const {client} = await openCluster({kubeconfig}, {maxConnections: 64})
let next = 0
await Promise.all(
  Array.from({length: 64}, async () => {
    while (next < paths.length) await client.request('DELETE', paths[next++]!)
  }),
)
client.close()
