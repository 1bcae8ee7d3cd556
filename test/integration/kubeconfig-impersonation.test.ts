import {expect} from 'chai'

import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, ensureNamespace, resetCluster, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {adminClient} from '../support/cluster.js'
import {kubeconfigWith} from '../support/kubeconfig.js'
import {bindClusterRole, upsert} from '../support/rbac.js'
import {nfdctl} from '../support/run-cli.js'

// The client certificate belongs to "impersonator", who may only impersonate. What `gc once` needs is granted to
// the group "gc-readers" alone, so the sweep works only when the kubeconfig's as-groups reach the API server.
describe('kubeconfig impersonation (as, as-groups, as-uid, as-user-extra) on a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient
  let impersonatorKubeconfig: string

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
    await bindClusterRole(client, 'nfdctl-test-impersonator', 'impersonator', [
      {apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate']},
      {apiGroups: ['authentication.k8s.io'], resources: ['uids', 'userextras/scopes'], verbs: ['impersonate']},
    ])
    const name = 'nfdctl-test-gc-readers'
    await upsert(client, '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: {name},
      rules: [
        {apiGroups: [''], resources: ['nodes'], verbs: ['list']},
        {apiGroups: ['nfd.k8s-sigs.io'], resources: ['nodefeatures'], verbs: ['list']},
        {apiGroups: ['topology.node.k8s.io'], resources: ['noderesourcetopologies'], verbs: ['list']},
      ],
    })
    await upsert(client, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: {name},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name},
      subjects: [{apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'gc-readers'}],
    })
    impersonatorKubeconfig = await plane.kubeconfigFor('impersonator')
  })

  beforeEach(async () => {
    await resetCluster(client)
    await seedNodesWithObjects(client, ['live-1', 'live-2'], 'nfd', 4)
    await createNodeFeature(client, 'nfd', 'gone-1', 'gone-1')
  })

  after(() => client?.close())

  /** The impersonator's kubeconfig with `user` fields added. */
  const userWith = (name: string, fields: Record<string, unknown>): Promise<string> => kubeconfigWith(impersonatorKubeconfig, name, (doc) => Object.assign(doc.users[0].user, fields))

  const everything = {as: 'alice', 'as-groups': ['gc-readers'], 'as-uid': 'alice-uid-42', 'as-user-extra': {scopes: ['view', 'audit']}}

  it('the API server sees exactly the impersonated user, uid, groups and extra (SelfSubjectReview)', async () => {
    const impersonating = await plane.client(await userWith('review', everything))
    try {
      const review = await impersonating.request<{status: {userInfo: Record<string, unknown>}}>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        body: {apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview'},
      })
      expect(review.status.userInfo).to.deep.equal({extra: {scopes: ['view', 'audit']}, groups: ['gc-readers', 'system:authenticated'], uid: 'alice-uid-42', username: 'alice'})
    } finally {
      impersonating.close()
    }
  })

  it('gc once --dry-run works with as-groups granting the access', async () => {
    const run = await nfdctl<SweepReport>(['gc', 'once', '--dry-run', '--json', '--kubeconfig', await userWith('groups', everything)])
    expect(run.exitCode, run.stdout + run.stderr + String(run.error)).to.equal(0)
    expect(run.result?.objects.map((o) => `${o.name}:${o.result}`)).to.deep.equal(['gone-1:would-delete'])
  })

  it('gc once --dry-run is forbidden when the same user is impersonated without the group', async () => {
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', await userWith('no-groups', {as: 'alice'})])
    expect(run.exitCode).to.equal(1)
    expect(String(run.error?.message))
      .to.match(/forbidden|403/i)
      .and.include('"alice"')
  })

  it('gc once --dry-run is forbidden for the impersonator itself (no impersonation)', async () => {
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', impersonatorKubeconfig])
    expect(run.exitCode).to.equal(1)
    expect(String(run.error?.message))
      .to.match(/forbidden|403/i)
      .and.include('"impersonator"')
  })

  it('refuses as-groups without as before contacting the API server (exit 2)', async () => {
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', await userWith('groups-only', {'as-groups': ['gc-readers']})])
    expect(run.exitCode).to.equal(2)
    expect(String(run.error?.message)).to.include('need "as"')
  })
})
