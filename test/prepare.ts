// The first step of `npm test`, run before the tests enter their network namespace (where nothing can be
// downloaded): build or find the Kubernetes binaries the integration and node tests run, and fetch what the
// image build needs and the prometheus-operator CRDs the chart's monitors are checked against. All are
// cached, so a warm run takes seconds. A failure here is one line: the tests that needed it then say what is
// missing (and fail under CI=true).
import {spawnSync} from 'node:child_process'

import {buildScript} from '../harness/controlplane/paths.js'
import {fetchImageInputs} from '../scripts/image/build.js'
import {prometheusOperatorCrds} from './support/chart.js'

const log = (line: string): void => {
  process.stderr.write(`prepare: ${line}\n`)
}
const steps: Array<{what: string; run: () => Promise<unknown>}> = [
  {
    // Its own process with stderr shown: a first build prints its progress for up to 25 minutes.
    run: async () => {
      const {status} = spawnSync('bash', [buildScript, 'node'], {stdio: ['ignore', 'ignore', 'inherit']})
      if (status !== 0) throw new Error(`${buildScript} exited with ${status}`)
    },
    what: 'Kubernetes binaries (kube-apiserver, etcd, kubelet, kube-scheduler, kube-controller-manager, kubectl, helm) and containerd',
  },
  {run: () => fetchImageInputs({log}), what: 'the image build inputs (Node runtimes, Debian libraries, koffi per platform)'},
  {run: () => prometheusOperatorCrds(), what: "prometheus-operator's ServiceMonitor and PodMonitor CRDs"},
]
for (const step of steps) {
  log(step.what)
  await step.run().catch((error: Error) => log(`${step.what} not ready (${error.message.split('\n').at(-1)}); the tests that need them will say so`))
}
