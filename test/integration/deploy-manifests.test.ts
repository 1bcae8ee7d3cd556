import {expect} from 'chai'
import {join} from 'node:path'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {type Manifest, placeManifest} from '../../harness/controlplane/manifests.js'
import {chartTools, deployDir, kustomize, type Tools} from '../support/chart.js'
import {adminClient} from '../support/cluster.js'
import {upsert} from '../support/rbac.js'

describe('deploy/ manifests against a real kube-apiserver (server-side dry run, strict field validation)', function () {
  let client: KubeClient
  let tools: Tools

  before(async function () {
    ;({client} = await adminClient(this))
    tools = await chartTools(this)
  })

  after(function () {
    client?.close()
  })

  for (const component of ['gc', 'gc/cronjob', 'plugins', 'agent', 'agent-dra']) {
    it(`kubectl apply -k deploy/${component}: every object is accepted as kustomize renders it, with no unknown field`, async function () {
      const docs = await kustomize(tools, join(deployDir, component))
      expect(docs.length).to.be.greaterThan(2)
      const namespace = docs.find((d) => d.metadata.namespace !== undefined)!.metadata.namespace!
      // Dry-run objects in a namespace need the namespace itself.
      await upsert(client, '/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: namespace}})
      for (const doc of docs) {
        const file = `${doc.kind}/${doc.metadata.name}`
        const placed = placeManifest(doc, doc.metadata.namespace ?? namespace)
        expect(placed, `${file}: kind ${doc.kind}`).to.not.equal(undefined)
        const {body, collection} = placed!
        try {
          await client.request('POST', collection, {body, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        } catch (error) {
          // A Namespace (or cluster object) made by an earlier test is there already: a dry-run update must then pass.
          if (!String(error).includes('AlreadyExists')) throw new Error(`${component}/${file} ${doc.kind} ${doc.metadata.name}: ${String(error)}`, {cause: error})
          await client.request('PUT', `${collection}/${doc.metadata.name}`, {body, query: {dryRun: 'All', fieldValidation: 'Strict'}})
        }
      }
    })
  }

  it("deploy/agent-dra is deploy/agent with --dra, kubelet's DRA directories, and a role and policies deploy/agent does not have", async function () {
    type Json = Record<string, unknown>
    const [plain, dra] = await Promise.all([kustomize(tools, join(deployDir, 'agent')), kustomize(tools, join(deployDir, 'agent-dra'))])
    const id = (o: Manifest): string => `${o.kind} ${o.metadata.name}`
    for (const object of plain.filter((o) => o.kind !== 'DaemonSet'))
      expect(
        dra.find((o) => id(o) === id(object)),
        id(object),
      ).to.deep.equal(object)
    expect(
      dra
        .map(id)
        .filter((i) => !plain.map(id).includes(i))
        .sort(),
    ).to.deep.equal([
      'ClusterRole nfdctl-agent-dra',
      'ClusterRoleBinding nfdctl-agent-dra',
      'ValidatingAdmissionPolicy nfdctl-agent-dra-device-classes',
      'ValidatingAdmissionPolicy nfdctl-agent-own-node-claims',
      'ValidatingAdmissionPolicy nfdctl-agent-own-node-slices',
      'ValidatingAdmissionPolicyBinding nfdctl-agent-dra-device-classes',
      'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-claims',
      'ValidatingAdmissionPolicyBinding nfdctl-agent-own-node-slices',
    ])
    // An install without DRA is granted nothing of resource.k8s.io.
    const rules = (objects: Manifest[]): Json[] => objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role').flatMap((r) => r.rules as Json[])
    expect(rules(plain).filter((r) => (r.apiGroups as string[]).includes('resource.k8s.io'))).to.deep.equal([])

    // The DaemonSet: deploy/agent's, and the flags, mounts and volumes of the driver after its own.
    const daemonSet = (objects: Manifest[]): {pod: Json & {volumes: Json[]}; agent: Json & {args: string[]; volumeMounts: Json[]}; whole: Manifest} => {
      const whole = objects.find((o) => o.kind === 'DaemonSet')!
      const pod = ((whole.spec as Json).template as Json).spec as Json & {volumes: Json[]; containers: Array<Json & {args: string[]; volumeMounts: Json[]}>}
      return {agent: pod.containers[0], pod, whole}
    }
    const [before, after] = [daemonSet(plain), daemonSet(dra)]
    const kubeletDir = '/var/lib/kubelet'
    expect(after.agent.args.slice(before.agent.args.length)).to.deep.equal(['--dra', `--kubelet-dir=${kubeletDir}`])
    // kubelet dials the socket path the driver registers: each directory is at the host's path in the container.
    // The claims' CDI specs go to --cdi-dir's default, /var/run/cdi, which only the driver mounts from the host:
    // deploy/agent writes no CDI spec, and a CDI spec can run hooks on the host.
    expect(after.agent.volumeMounts.slice(before.agent.volumeMounts.length)).to.deep.equal([
      {mountPath: `${kubeletDir}/plugins_registry`, name: 'plugins-registry'},
      {mountPath: `${kubeletDir}/plugins/devices.nfdctl.io`, name: 'dra-plugin'},
      {mountPath: '/var/run/cdi', name: 'cdi'},
    ])
    expect(after.pod.volumes.slice(before.pod.volumes.length)).to.deep.equal([
      {hostPath: {path: `${kubeletDir}/plugins_registry`, type: 'Directory'}, name: 'plugins-registry'},
      {hostPath: {path: `${kubeletDir}/plugins/devices.nfdctl.io`, type: 'DirectoryOrCreate'}, name: 'dra-plugin'},
      {hostPath: {path: '/var/run/cdi', type: 'DirectoryOrCreate'}, name: 'cdi'},
    ])
    expect(before.agent.volumeMounts.map((m) => m.name)).to.not.include('cdi')
    expect(before.pod.volumes.map((v) => v.name)).to.not.include('cdi')
    after.agent.args.splice(before.agent.args.length)
    after.agent.volumeMounts.splice(before.agent.volumeMounts.length)
    after.pod.volumes.splice(before.pod.volumes.length)
    expect(after.whole, 'the rest of the DaemonSet').to.deep.equal(before.whole)

    // The role is bound to the DaemonSet's service account.
    const binding = dra.find((o) => id(o) === 'ClusterRoleBinding nfdctl-agent-dra')!
    expect(binding.subjects).to.deep.equal([{kind: 'ServiceAccount', name: before.pod.serviceAccountName, namespace: before.whole.metadata.namespace}])
  })
})
