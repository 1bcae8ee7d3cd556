// bench:gc's plain DELETE loop in a fresh process: the installed CLI's own client (from <package>/dist),
// started with the CLI's Node flags, sends plain DELETEs for the paths on stdin, 64 in flight, and prints
// the CPU seconds it used. The ceiling is the faster of this and the same loop in the benchmark's warm
// process.
// Usage: node <flags> fresh-delete-loop.mjs <package dir> <kubeconfig> < paths
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'

const [pkg, kubeconfig] = process.argv.slice(2)
const {openCluster} = await import(pathToFileURL(join(pkg, 'dist/lib/kube/connect.js')).href)
const paths = readFileSync(0, 'utf8').split('\n').filter(Boolean)
const {client} = await openCluster({kubeconfig}, {maxConnections: 64})
let next = 0
await Promise.all(
  Array.from({length: 64}, async () => {
    while (next < paths.length) await client.request('DELETE', paths[next++])
  }),
)
client.close()
const cpu = process.cpuUsage()
process.stdout.write(`${(cpu.user + cpu.system) / 1e6}\n`)
