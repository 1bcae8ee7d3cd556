import {execFile} from 'node:child_process'
import {promisify} from 'node:util'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {waitFor} from '../process/wait.js'

const run = promisify(execFile)

interface Service {
  spec: {clusterIP: string; ports: Array<{port: number; targetPort?: number}>}
}

interface EndpointSlices {
  items: Array<{endpoints?: Array<{addresses: string[]}>; ports?: Array<{port?: number}>}>
}

/**
 * What kube-proxy would do for the one Service the node's workloads use, the API server's `kubernetes`
 * Service: DNAT from its ClusterIP to the endpoint the apiserver publishes, for pods on the bridge
 * (PREROUTING) and host-network processes (OUTPUT). The rules live in the test's network namespace and go
 * with it.
 */
export async function routeKubernetesService(client: KubeClient): Promise<{clusterIp: string; endpoint: string}> {
  const service = await client.request<Service>('GET', '/api/v1/namespaces/default/services/kubernetes')
  const endpoint = await waitFor(
    'the kubernetes Service endpoint',
    async () => {
      const slices = await client.request<EndpointSlices>('GET', '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes')
      const slice = slices.items.find((s) => s.endpoints?.[0]?.addresses[0] !== undefined && s.ports?.[0]?.port !== undefined)
      return slice === undefined ? undefined : `${slice.endpoints![0].addresses[0]}:${slice.ports![0].port}`
    },
    {timeoutMs: 30_000},
  )
  const clusterIp = service.spec.clusterIP
  const port = String(service.spec.ports[0].port)
  const match = ['-d', `${clusterIp}/32`, '-p', 'tcp', '-m', 'tcp', '--dport', port, '-j', 'DNAT']
  for (const chain of ['PREROUTING', 'OUTPUT']) {
    // A node started again in the same namespace (after a suite stopped it) may face another control plane:
    // the earlier node's rule, first in the chain, would still send pods to the API server it knew.
    const {stdout} = await run('iptables', ['-w', '-t', 'nat', '-S', chain])
    for (const rule of stdout.split('\n').filter((line) => line.startsWith(`-A ${chain} ${match.join(' ')} `))) {
      await run('iptables', ['-w', '-t', 'nat', '-D', ...rule.slice(3).split(' ')])
    }
    await run('iptables', ['-w', '-t', 'nat', '-A', chain, ...match, '--to-destination', endpoint])
  }
  return {clusterIp: `${clusterIp}:${port}`, endpoint}
}
