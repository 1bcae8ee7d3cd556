// npm run demo: build (done by the npm script), start the local control plane, seed Nodes and NFD objects
// (some of them stale), then show `gc once --dry-run`, `gc once`, and a clean second sweep. Then, as root with
// the node's packages, the device half (scripts/demo/device-half.ts); elsewhere one line says what it needs.
import {spawnSync} from 'node:child_process'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {ControlPlane} from '../harness/controlplane/control-plane.js'
import {ensureBinaries, repoRoot} from '../harness/controlplane/paths.js'
import {createNodeFeature, createTopology, ensureNamespace, seedNodesWithObjects} from '../harness/controlplane/seed.js'
import {deviceHalfNotice, missingPackages, probeMachine} from './demo/device-prerequisites.js'
import {say} from './demo/show.js'

const dir = join(repoRoot, '.cluster')
await ControlPlane.stopDetached(dir)
await rm(dir, {force: true, recursive: true})
say('starting etcd + kube-apiserver (built from the Go module proxy on first use)')
const plane = await ControlPlane.start({binDir: await ensureBinaries((l) => process.stderr.write(l + '\n')), detached: true, dir, log: (l) => process.stdout.write(l + '\n')})
const client = await plane.client()

say('seeding 8 Nodes, each with a NodeFeature and a NodeResourceTopology, plus objects of 3 vanished nodes')
await ensureNamespace(client, 'node-feature-discovery')
await ensureNamespace(client, 'gpu-operator')
const live = [...Array(8).keys()].map((i) => `worker-${i + 1}`)
await seedNodesWithObjects(client, live, 'node-feature-discovery', 8)
for (const gone of ['worker-9', 'worker-10']) {
  await createNodeFeature(client, 'node-feature-discovery', gone, gone)
  await createTopology(client, gone)
}
await createNodeFeature(client, 'gpu-operator', 'nvidia-features-for-worker-11', 'worker-11')
await createNodeFeature(client, 'gpu-operator', 'nvidia-features-for-worker-1', 'worker-1')
await createNodeFeature(client, 'gpu-operator', 'hand-made-features', undefined)
client.close()

const nfdctl = (...args: string[]): number => {
  process.stdout.write(`\n$ nfdctl ${args.join(' ')}\n`)
  const result = spawnSync(process.execPath, [join(repoRoot, 'bin/run.js'), ...args, '--kubeconfig', plane.kubeconfig], {stdio: 'inherit'})
  return result.status ?? 1
}

say('what would be collected (nothing is deleted)')
nfdctl('gc', 'once', '--dry-run')
say('collect')
const code = nfdctl('gc', 'once')
say('a second sweep finds nothing')
nfdctl('gc', 'once', '-o', 'yaml')
process.exitCode = code

// As root on a Debian-like machine, the node's packages are installed rather than asked for.
const missing = missingPackages(probeMachine())
if (process.getuid?.() === 0 && missing.length > 0 && probeMachine().has('apt-get')) {
  say(`installing what the local node needs: ${missing.join(' ')}`)
  process.stdout.write(`$ apt-get update && apt-get install -y --no-install-recommends ${missing.join(' ')}\n`)
  const env = {...process.env, DEBIAN_FRONTEND: 'noninteractive'}
  const updated = spawnSync('apt-get', ['update', '-qq'], {env, stdio: 'inherit'}).status === 0
  if (updated) spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], {env, stdio: 'inherit'})
}
const notice = deviceHalfNotice(probeMachine())
const lines = ["the GC half's control plane (etcd + kube-apiserver on loopback):", `  export KUBECONFIG=${plane.kubeconfig}; bin/run.js gc once --dry-run`, '  stop it: npm run cluster:down']
if (notice === undefined) {
  // Loaded only here: it binds libc through koffi for /dev/loop-control.
  const half = await import('./demo/device-half.js')
  let kubectl = 'kubectl'
  try {
    kubectl = (await half.deviceHalf()).kubectl
  } catch (error) {
    process.stdout.write(`\ndemo: the device half failed: ${(error as Error).message}\n(the node's logs are in .node/)\n`)
    process.exitCode = 1
  }
  lines.push(
    `the node and its control plane (network namespace ${half.netns}):`,
    `  nsenter --net=/run/netns/${half.netns} -- ${kubectl} --kubeconfig ${half.nodeKubeconfig} -n nfdctl-demo logs -f reader`,
    `  stop it: npm run node:down (it removes /dev/loop${half.demoLoop} too)`,
  )
} else say(notice)

say('it keeps running; how to reach it and stop it')
process.stdout.write(lines.join('\n') + '\n')
