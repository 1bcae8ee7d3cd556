// The first step of `npm test`, run before the tests enter their network namespace (where nothing can be
// downloaded): build or find the Kubernetes binaries the integration and node tests run, and fetch what the
// image build needs and the prometheus-operator CRDs the chart's monitors are checked against. Both are cached, so a warm run takes seconds. A failure here is one line: the tests that
// needed it then say what is missing (and fail under CI=true).
import {spawnSync} from 'node:child_process'
import {fileURLToPath} from 'node:url'

import {prometheusOperatorCrds} from './support/chart.js'

const repo = fileURLToPath(new URL('..', import.meta.url))
const steps: Array<{what: string; command: string; args: string[]}> = [
  {args: ['test/controlplane/build.sh', 'node'], command: 'bash', what: 'Kubernetes binaries (kube-apiserver, etcd, kubelet, kube-scheduler, kube-controller-manager, kubectl, helm)'},
  {args: ['tsx', 'scripts/image/cli.ts', '--fetch-only'], command: 'npx', what: 'the image build inputs (Node runtimes, Debian libraries, koffi per platform)'},
]
for (const step of steps) {
  process.stderr.write(`prepare: ${step.what}\n`)
  const result = spawnSync(step.command, step.args, {cwd: repo, stdio: ['ignore', 'ignore', 'inherit']})
  if (result.status !== 0) process.stderr.write(`prepare: ${step.what} not ready (exit ${result.status ?? result.signal}); the tests that need them will say so\n`)
}
process.stderr.write("prepare: prometheus-operator's ServiceMonitor and PodMonitor CRDs\n")
await prometheusOperatorCrds().catch((error: Error) => process.stderr.write(`prepare: prometheus-operator's CRDs not ready (${error.message}); the chart test will say so\n`))
