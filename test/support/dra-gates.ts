import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {waitFor} from '../../harness/process/wait.js'

/** The name of the MutatingAdmissionPolicy and binding dropExtendedResourceNames makes. */
const dropExtendedResourceNamesPolicy = 'nfdctl-test-drop-extended-resource-name'

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
  await waitFor('the policy dropping extendedResourceName', async () => !(await keepsExtendedResourceName(client)), {timeoutMs: 30_000})
}

/** Takes the policy of dropExtendedResourceNames away; resolves once the API server keeps the field again (the next test on the control plane finds it kept). */
export async function keepExtendedResourceNames(client: KubeClient): Promise<void> {
  for (const kind of ['mutatingadmissionpolicybindings', 'mutatingadmissionpolicies']) {
    await client.request('DELETE', `/apis/admissionregistration.k8s.io/v1/${kind}/${dropExtendedResourceNamesPolicy}`).catch(() => {})
  }
  await waitFor('the API server keeping extendedResourceName', () => keepsExtendedResourceName(client), {timeoutMs: 30_000})
}

/** Whether a DeviceClass written (dry run) comes back with its extendedResourceName. */
async function keepsExtendedResourceName(client: KubeClient): Promise<boolean> {
  const probe = {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'DeviceClass',
    metadata: {name: 'probe.example.com'},
    spec: {extendedResourceName: 'example.com/probe', selectors: [{cel: {expression: 'true'}}]},
  }
  const stored = await client.request<{spec: {extendedResourceName?: string}}>('POST', '/apis/resource.k8s.io/v1/deviceclasses', {body: probe, query: {dryRun: 'All'}})
  return stored.spec.extendedResourceName !== undefined
}
