import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {startedEarly} from '../../support/started-early.js'

const repo = new URL('../../../', import.meta.url).pathname

// In a fresh process, as a daemon starts: the commands that run in the cluster import everything they
// import, resolve their credentials, and only then is it known whether yaml was loaded. A kubeconfig file
// loads it (the check can see it); service-account credentials must not.
describe('yaml is loaded on first use only', function () {
  const dir = mkdtempSync(join(tmpdir(), 'nfdctl-yaml-'))
  const sa = join(dir, 'sa/var/run/secrets/kubernetes.io/serviceaccount')
  mkdirSync(sa, {recursive: true})
  writeFileSync(join(sa, 'token'), 'service-account-token')
  writeFileSync(join(sa, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')
  writeFileSync(
    join(dir, 'kubeconfig'),
    'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
  )
  const script = `
    const {default: Module} = await import('node:module')
    const yamlLoaded = () => Object.keys(Module._cache).some((path) => path.includes('/node_modules/yaml/'))
    await import(${JSON.stringify(`${repo}src/commands/gc/run.ts`)})
    await import(${JSON.stringify(`${repo}src/commands/devices/agent.ts`)})
    await import(${JSON.stringify(`${repo}src/commands/plugins/serve.ts`)})
    const {resolveKubeConfig} = await import(${JSON.stringify(`${repo}src/lib/kube/kubeconfig-resolver.ts`)})
    const inCluster = resolveKubeConfig({env: {KUBERNETES_SERVICE_HOST: '127.0.0.2', KUBERNETES_SERVICE_PORT: '443'}, home: ${JSON.stringify(dir)}, serviceAccountRoot: ${JSON.stringify(join(dir, 'sa'))}})
    const afterInCluster = yamlLoaded()
    const fromFile = resolveKubeConfig({env: {}, home: ${JSON.stringify(dir)}, kubeconfig: ${JSON.stringify(join(dir, 'kubeconfig'))}})
    console.log(JSON.stringify({afterInCluster, afterFile: yamlLoaded(), servers: [inCluster.server, fromFile.server]}))
  `
  const run = startedEarly(async () => {
    try {
      return await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {cwd: repo})
    } finally {
      rmSync(dir, {force: true, recursive: true})
    }
  })

  it('not by gc run, devices agent or plugins serve with in-cluster credentials; by a kubeconfig file', async function () {
    this.timeout(30_000)
    const {stdout} = await run
    expect(JSON.parse(stdout)).to.deep.equal({afterFile: true, afterInCluster: false, servers: ['https://127.0.0.2:443', 'https://127.0.0.1:6443']})
  })
})
