import {expect} from 'chai'
import {chmodSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import type {SweepReport} from '../../src/lib/gc/sweep-report.js'
import {isStatus} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {createNodeFeature, ensureNamespace, resetCluster, seedNodesWithObjects} from '../../harness/controlplane/seed.js'
import {waitFor} from '../../harness/process/wait.js'
import {adminClient} from '../support/cluster.js'
import {GcProcess} from '../support/gc-process.js'
import {kubeconfigWith, type Kubeconfig} from '../support/kubeconfig.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {nfdctl} from '../support/run-cli.js'

const v1 = 'client.authentication.k8s.io/v1'

// Exec plugins and the context namespace end to end, through the CLI, against the real API server.
describe('kubeconfig exec plugins and context namespace against a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient
  let admin: Kubeconfig
  let plugin: string

  before(async function () {
    ;({client, plane} = await adminClient(this))
    await ensureNamespace(client, 'nfd')
    await ensureNamespace(client, 'from-context')
    admin = JSON.parse(await readFile(plane.kubeconfig, 'utf8')) as Kubeconfig
    // Hands out the admin client certificate; tells the user something on stderr; records its exec info.
    plugin = join(plane.options.dir, 'exec-plugin.mjs')
    await writeFile(
      plugin,
      `#!${process.execPath}
import {readFileSync, writeFileSync} from 'node:fs'
process.stderr.write('exec-plugin: using the cached login of alice@example\\n')
writeFileSync(process.env.EXEC_INFO_FILE, process.env.KUBERNETES_EXEC_INFO)
const user = JSON.parse(readFileSync(process.env.ADMIN_KUBECONFIG, 'utf8')).users[0].user
const pem = (b64) => Buffer.from(b64, 'base64').toString('utf8')
process.stdout.write(JSON.stringify({apiVersion: '${v1}', kind: 'ExecCredential',
  status: {clientCertificateData: pem(user['client-certificate-data']), clientKeyData: pem(user['client-key-data'])}}))
`,
    )
    chmodSync(plugin, 0o755)
  })

  beforeEach(async () => {
    await resetCluster(client)
    await seedNodesWithObjects(client, ['live-1'], 'nfd', 2)
    await createNodeFeature(client, 'nfd', 'gone-1', 'gone-1')
  })

  after(() => client?.close())

  it("gc once authenticates with the plugin's certificate, shows its stderr and gives it the cluster (provideClusterInfo)", async () => {
    const infoFile = join(plane.options.dir, 'exec-info.json')
    const kubeconfig = await kubeconfigWith(plane.kubeconfig, 'exec', (doc) => {
      doc.clusters[0].cluster.extensions = [{extension: {audience: 'nfdctl-test'}, name: 'client.authentication.k8s.io/exec'}]
      doc.users[0].user = {
        exec: {
          apiVersion: v1,
          command: plugin,
          env: [
            {name: 'ADMIN_KUBECONFIG', value: plane.kubeconfig},
            {name: 'EXEC_INFO_FILE', value: infoFile},
          ],
          interactiveMode: 'IfAvailable',
          provideClusterInfo: true,
        },
      }
    })
    const run = await nfdctl<SweepReport>(['gc', 'once', '--dry-run', '--json', '--kubeconfig', kubeconfig])
    expect(run.exitCode, run.stdout + run.stderr + String(run.error)).to.equal(0)
    expect(run.result?.objects.map((o) => o.name)).to.deep.equal(['gone-1'])
    expect(run.stderr).to.include('exec-plugin: using the cached login of alice@example')
    const info = JSON.parse(await readFile(infoFile, 'utf8')) as {spec: {interactive: boolean; cluster: Record<string, unknown>}}
    expect(info.spec.interactive).to.equal(false) // IfAvailable, and the test's stdin is not a terminal
    expect(info.spec.cluster).to.deep.equal({
      'certificate-authority-data': admin.clusters[0].cluster['certificate-authority-data'],
      config: {audience: 'nfdctl-test'},
      server: admin.clusters[0].cluster.server,
    })
  })

  it('gc once shows the installHint when the plugin is not installed (exit 2)', async () => {
    const kubeconfig = await kubeconfigWith(plane.kubeconfig, 'exec-missing', (doc) => {
      doc.users[0].user = {exec: {apiVersion: v1, command: 'nfdctl-test-no-such-login', installHint: 'Install it: go install example.com/login@latest', interactiveMode: 'Never'}}
    })
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', kubeconfig])
    expect(run.exitCode).to.equal(2)
    expect(String(run.error?.message)).to.include('"nfdctl-test-no-such-login" not found').and.include('Install it: go install example.com/login@latest')
  })

  it('gc once refuses interactiveMode Always without a terminal (exit 2)', async () => {
    const kubeconfig = await kubeconfigWith(plane.kubeconfig, 'exec-always', (doc) => {
      doc.users[0].user = {exec: {apiVersion: v1, command: plugin, interactiveMode: 'Always'}}
    })
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', kubeconfig])
    expect(run.exitCode).to.equal(2)
    expect(String(run.error?.message)).to.include('standard input is not a terminal')
  })

  it('gc once with an expired oidc id-token whose refresh fails exits 2 with one line saying how to fix it', async () => {
    const expired = `e30.${Buffer.from(JSON.stringify({exp: 1})).toString('base64url')}.c2ln`
    const kubeconfig = await kubeconfigWith(plane.kubeconfig, 'oidc', (doc) => {
      doc.users[0].user = {'auth-provider': {config: {'client-id': 'k', 'id-token': expired, 'idp-issuer-url': 'http://127.0.0.1:1/idp', 'refresh-token': 'r'}, name: 'oidc'}}
    })
    const run = await nfdctl(['gc', 'once', '--dry-run', '--kubeconfig', kubeconfig])
    expect(run.exitCode).to.equal(2)
    expect(String(run.error?.message)).to.match(/id-token has expired .*refreshing it failed: .*ECONNREFUSED.*; log in to http:\/\/127\.0\.0\.1:1\/idp again/)
  })

  it("gc run --leader-elect puts its Lease in the context's namespace outside a pod", async function () {
    if (process.env.POD_NAMESPACE) missingPrerequisite(this, '$POD_NAMESPACE is set, and it wins over the context namespace (as documented)')
    const kubeconfig = await kubeconfigWith(plane.kubeconfig, 'namespace', (doc) => {
      doc.contexts[0].context.namespace = 'from-context'
    })
    const gc = await GcProcess.start(['--kubeconfig', kubeconfig, '--interval', '1h', '--leader-elect'])
    try {
      const lease = await waitFor(
        'the Lease in from-context',
        async () => {
          try {
            return await client.request<{spec: {holderIdentity?: string}}>('GET', '/apis/coordination.k8s.io/v1/namespaces/from-context/leases/nfdctl-gc')
          } catch (error) {
            if (isStatus(error, 'NotFound')) return undefined
            throw error
          }
        },
        {intervalMs: 50, timeoutMs: 20_000},
      )
      expect(lease.spec.holderIdentity).to.be.a('string')
    } finally {
      expect(await gc.stop()).to.equal(0)
      await client.request('DELETE', '/apis/coordination.k8s.io/v1/namespaces/from-context/leases/nfdctl-gc').catch((error: unknown) => {
        if (!isStatus(error, 'NotFound')) throw error
      })
    }
  })
})
