import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {waitFor} from '../../harness/process/wait.js'

/** The MutatingAdmissionPolicy and binding dropExtendedResourceNames makes (delete both on a shared control plane). */
export const dropExtendedResourceNamesPolicy = 'nfdctl-test-drop-extended-resource-name'

/**
 * Kubernetes 1.37 locks DRAExtendedResource on (GA), so this API server drops extendedResourceName as a 1.34
 * or 1.35 one with the gate off does, by a MutatingAdmissionPolicy that removes the field on every write:
 * what the agent sees (the field missing from what the API server returns) is the same. Resolves once it
 * acts (policies reach admission a moment after they are created).
 */
export async function dropExtendedResourceNames(client: KubeClient): Promise<void> {
  const name = dropExtendedResourceNamesPolicy
  await client.request('POST', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies', {
    body: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingAdmissionPolicy',
      metadata: {name},
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {resourceRules: [{apiGroups: ['resource.k8s.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['deviceclasses']}]},
        mutations: [{jsonPatch: {expression: 'has(object.spec.extendedResourceName) ? [JSONPatch{op: "remove", path: "/spec/extendedResourceName"}] : []'}, patchType: 'JSONPatch'}],
        reinvocationPolicy: 'Never',
      },
    },
  })
  await client.request('POST', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings', {
    body: {apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicyBinding', metadata: {name}, spec: {policyName: name}},
  })
  const probe = {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'DeviceClass',
    metadata: {name: 'probe.example.com'},
    spec: {extendedResourceName: 'example.com/probe', selectors: [{cel: {expression: 'true'}}]},
  }
  await waitFor(
    'the policy dropping extendedResourceName',
    async () => {
      const stored = await client.request<{spec: {extendedResourceName?: string}}>('POST', '/apis/resource.k8s.io/v1/deviceclasses', {body: probe, query: {dryRun: 'All'}})
      return stored.spec.extendedResourceName === undefined
    },
    {timeoutMs: 30_000},
  )
}
