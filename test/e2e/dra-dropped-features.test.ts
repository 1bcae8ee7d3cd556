import {expect} from 'chai'
import {mkdir, mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {draAgentArgs} from '../../harness/devices/dra-agent.js'
import {createNamespace, deletePods, type NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {waitFor} from '../../harness/process/wait.js'
import {dropExtendedResourceNames, keepExtendedResourceNames} from '../support/dra-gates.js'
import {clusterGates, describeWhere, kubeMinor} from '../support/kube-version.js'
import {testNode} from '../support/test-node.js'

// No device: the class matches nothing, so this test owns no loop number. On 1.34 and 1.35 the API server's
// default gates drop extendedResourceName; from 1.36 a policy drops it as they do (see dropExtendedResourceNames).
const classesPath = '/apis/devices.nfdctl.io/v1alpha1/deviceclasses'
const className = 'limitless'
const namespace = 'nfdctl-dra-dropped'

interface Condition {
  type: string
  status: string
  reason: string
  message: string
}

// A 1.34 or 1.35 API server with DRAExtendedResource on keeps the field and has no MutatingAdmissionPolicy to drop it.
describeWhere(!clusterGates.extendedResource || kubeMinor >= 36, 'DRAExtendedResource is on and no MutatingAdmissionPolicy is served')(
  'devices agent --dra on a cluster whose API server drops extendedResourceName (1.34 with its default gates)',
  function () {
    let env: NodeEnv
    let dir: string
    let agent: CliProcess | undefined

    before(async function () {
      this.timeout(120_000)
      env = await testNode(this)
      dir = await mkdtemp(join(tmpdir(), 'nfdctl-dra-dropped-'))
      await mkdir(join(dir, 'udev'))
      if (clusterGates.extendedResource) await dropExtendedResourceNames(env.client)
      await createNamespace(env, namespace)
      await env.client.request('POST', classesPath, {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: className}, spec: {allocation: 'DRA', match: [{devName: 'nfdctl-absent-*', subsystem: 'block'}]}},
      })
      agent = new CliProcess(draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state'), udevDir: join(dir, 'udev')}))
    })

    after(async function () {
      this.timeout(60_000)
      await deletePods(env, [`${namespace}/by-limit`])
      await agent?.stop('SIGTERM')
      await env.client.request('DELETE', `${classesPath}/${className}`).catch(() => {})
      await env.client.request('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => {})
      // The node's control plane is the run's: the tests after this one find the field kept.
      if (clusterGates.extendedResource) await keepExtendedResourceNames(env.client)
      await rm(dir, {force: true, recursive: true})
    })

    it('a pod asking by limit stays Pending, and the class says why and what to do, in its status and an Event', async function () {
      this.timeout(90_000)
      const condition = await waitFor(
        'LimitRequestsServed on the class',
        async () => {
          const got = await env.client.request<{status?: {conditions?: Condition[]}}>('GET', `${classesPath}/${className}`)
          return got.status?.conditions?.find((c) => c.type === 'LimitRequestsServed')
        },
        {timeoutMs: 60_000},
      )
      expect(condition).to.include({reason: 'ExtendedResourceDropped', status: 'False'})
      expect(condition.message).to.include(`devices.nfdctl.io/${className}`).and.include('ask by ResourceClaim instead')
      const events = await waitFor('the Event on the class', async () => {
        const list = await env.client.request<{items: Array<{reason: string; source?: {host?: string}}>}>('GET', '/api/v1/namespaces/default/events', {
          query: {fieldSelector: `involvedObject.name=${className},involvedObject.kind=DeviceClass,reason=ExtendedResourceDropped`},
        })
        return list.items.length > 0 ? list.items : undefined
      })
      expect(events.map((e) => e.source?.host)).to.deep.equal([env.node.name])

      await env.client.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {name: 'by-limit'},
          spec: {
            containers: [
              {command: ['sleep', '3600'], image: 'localhost/nfdctl-test/busybox:1', imagePullPolicy: 'Never', name: 'main', resources: {limits: {[`devices.nfdctl.io/${className}`]: '1'}}},
            ],
            terminationGracePeriodSeconds: 0,
          },
        },
      })
      const unschedulable = await waitFor('the pod unschedulable', async () => {
        const pod = await env.client.request<{status?: {conditions?: Array<{type: string; status: string; message?: string}>}}>('GET', `/api/v1/namespaces/${namespace}/pods/by-limit`)
        return pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False')
      })
      expect(unschedulable.message).to.include(`Insufficient devices.nfdctl.io/${className}`)
    })
  },
)
