import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'

import {ConfigError} from '../../../src/lib/errors.js'
import {resolveKubeConfig, type KubeConfigSource} from '../../../src/lib/kube/kubeconfig.js'

interface Ctx {
  readonly name: string
  readonly server: string
  /** Defaults to the context name; lets two files share cluster/user names. */
  readonly entry?: string
}

/** A minimal kubeconfig with one cluster, user and context per entry. */
function kubeconfigYaml(contexts: Ctx[], current?: string): string {
  const entry = (c: Ctx): string => c.entry ?? c.name
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    ...contexts.flatMap((c) => [`- name: ${entry(c)}-cluster`, '  cluster:', `    server: ${c.server}`]),
    'users:',
    ...contexts.flatMap((c) => [`- name: ${entry(c)}-user`, '  user:', '    token: t0ken']),
    'contexts:',
    ...contexts.flatMap((c) => [`- name: ${c.name}`, '  context:', `    cluster: ${entry(c)}-cluster`, `    user: ${entry(c)}-user`]),
    ...(current === undefined ? [] : [`current-context: ${current}`]),
    '',
  ].join('\n')
}

function configErrorFrom(fn: () => unknown): ConfigError {
  try {
    fn()
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError)
    expect((error as ConfigError).exitCode).to.equal(2)
    return error as ConfigError
  }
  expect.fail('expected a ConfigError, but nothing was thrown')
}

describe('resolveKubeConfig', () => {
  let root: string
  /** A directory with no .kube/config and no service account: nothing to fall back on. */
  let emptyHome: string
  let noServiceAccount: string

  function file(name: string, text: string): string {
    const path = join(root, name)
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, text)
    return path
  }

  /** Never reads the real environment, home or service account. */
  function resolve(source: KubeConfigSource): ReturnType<typeof resolveKubeConfig> {
    return resolveKubeConfig({env: {}, home: emptyHome, serviceAccountRoot: noServiceAccount, ...source})
  }

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'nfdctl-kubeconfig-'))
    emptyHome = join(root, 'empty-home')
    noServiceAccount = join(root, 'no-service-account')
    mkdirSync(emptyHome)
    mkdirSync(noServiceAccount)
  })

  after(() => {
    rmSync(root, {force: true, recursive: true})
  })

  describe('--kubeconfig', () => {
    it('fails with a ConfigError naming a missing file', () => {
      const missing = join(root, 'does-not-exist.yaml')
      const error = configErrorFrom(() => resolve({kubeconfig: missing}))
      expect(error.message).to.include(missing)
      expect(error.message).to.include('--kubeconfig')
    })

    it('loads an existing file and returns its server and origin', () => {
      const path = file('explicit.yaml', kubeconfigYaml([{name: 'dev', server: 'https://dev.example:6443'}], 'dev'))
      const resolved = resolve({kubeconfig: path})
      expect(resolved.server).to.equal('https://dev.example:6443')
      expect(resolved.origin).to.equal(`kubeconfig ${path} (context dev)`)
      expect(resolved.context).to.equal('dev')
    })

    it('wins over KUBECONFIG and ~/.kube/config', () => {
      const explicit = file('wins/explicit.yaml', kubeconfigYaml([{name: 'a', server: 'https://explicit:1'}], 'a'))
      const fromEnv = file('wins/env.yaml', kubeconfigYaml([{name: 'b', server: 'https://env:2'}], 'b'))
      const home = join(root, 'wins-home')
      file('wins-home/.kube/config', kubeconfigYaml([{name: 'c', server: 'https://home:3'}], 'c'))
      expect(resolve({env: {KUBECONFIG: fromEnv}, home, kubeconfig: explicit}).server).to.equal('https://explicit:1')
    })

    it('fails with a ConfigError naming the file when the YAML is malformed', () => {
      const path = file('malformed.yaml', 'clusters: [\n  - name: x\n  cluster: {server: ]\n')
      const error = configErrorFrom(() => resolve({kubeconfig: path}))
      expect(error.message).to.include(path)
      expect(error.message).to.include('cannot be read')
    })

    it('fails with a ConfigError for an empty file', () => {
      const path = file('empty.yaml', '')
      const error = configErrorFrom(() => resolve({kubeconfig: path}))
      expect(error.message).to.include(path)
    })

    it('fails with a ConfigError asking for --context when there is no current-context', () => {
      const path = file('no-current.yaml', kubeconfigYaml([{name: 'dev', server: 'https://dev:1'}]))
      const error = configErrorFrom(() => resolve({kubeconfig: path}))
      expect(error.message).to.include('no current context')
      expect(error.message).to.include('--context')
    })

    it('fails with a ConfigError when current-context names a context that does not exist', () => {
      const path = file('dangling-current.yaml', kubeconfigYaml([{name: 'dev', server: 'https://dev:1'}], 'prod'))
      const error = configErrorFrom(() => resolve({kubeconfig: path}))
      expect(error.message).to.include('no current context')
    })

    it('accepts a file without a current-context when --context picks one', () => {
      const path = file('no-current-2.yaml', kubeconfigYaml([{name: 'dev', server: 'https://dev:1'}]))
      expect(resolve({context: 'dev', kubeconfig: path}).server).to.equal('https://dev:1')
    })
  })

  describe('--context', () => {
    let path: string
    before(() => {
      path = file(
        'two-contexts.yaml',
        kubeconfigYaml(
          [
            {name: 'dev', server: 'https://dev:6443'},
            {name: 'prod', server: 'https://prod:6443'},
          ],
          'dev',
        ),
      )
    })

    it('defaults to current-context', () => {
      expect(resolve({kubeconfig: path}).server).to.equal('https://dev:6443')
    })

    it('switches the server', () => {
      const resolved = resolve({context: 'prod', kubeconfig: path})
      expect(resolved.server).to.equal('https://prod:6443')
      expect(resolved.origin).to.equal(`kubeconfig ${path} (context prod)`)
      expect(resolved.context).to.equal('prod')
    })

    it('fails with a ConfigError listing the available contexts for an unknown one', () => {
      const error = configErrorFrom(() => resolve({context: 'staging', kubeconfig: path}))
      expect(error.message).to.include('"staging"')
      expect(error.message).to.include('available: dev, prod')
    })
  })

  describe('KUBECONFIG', () => {
    it('merges two files so that a context from the second file can be selected', () => {
      const first = file('merge/first.yaml', kubeconfigYaml([{name: 'one', server: 'https://one:1'}], 'one'))
      const second = file('merge/second.yaml', kubeconfigYaml([{name: 'two', server: 'https://two:2'}]))
      const env = {KUBECONFIG: [first, second].join(delimiter)}
      const resolved = resolve({context: 'two', env})
      expect(resolved.server).to.equal('https://two:2')
      expect(resolved.origin).to.include('from KUBECONFIG')
      expect(resolved.contexts).to.deep.equal(['one', 'two'])
      expect(resolve({env}).server).to.equal('https://one:1')
    })

    it('skips files that do not exist and empty entries', () => {
      const present = file('skip/present.yaml', kubeconfigYaml([{name: 'p', server: 'https://present:1'}], 'p'))
      const env = {KUBECONFIG: ['', join(root, 'skip/missing.yaml'), present, ''].join(delimiter)}
      const resolved = resolve({env})
      expect(resolved.server).to.equal('https://present:1')
      expect(resolved.origin).to.equal(`kubeconfig ${present} (from KUBECONFIG) (context p)`)
    })

    it('fails with a ConfigError when it names no existing file', () => {
      const value = [join(root, 'nope-1.yaml'), join(root, 'nope-2.yaml')].join(delimiter)
      const error = configErrorFrom(() => resolve({env: {KUBECONFIG: value}}))
      expect(error.message).to.include('KUBECONFIG')
      expect(error.message).to.include(value)
      expect(error.message).to.include('--kubeconfig')
    })

    it('wins over ~/.kube/config', () => {
      const fromEnv = file('env-wins/env.yaml', kubeconfigYaml([{name: 'e', server: 'https://env:1'}], 'e'))
      const home = join(root, 'env-wins-home')
      file('env-wins-home/.kube/config', kubeconfigYaml([{name: 'h', server: 'https://home:2'}], 'h'))
      expect(resolve({env: {KUBECONFIG: fromEnv}, home}).server).to.equal('https://env:1')
    })

    it('is ignored when empty', () => {
      const home = join(root, 'empty-env-home')
      file('empty-env-home/.kube/config', kubeconfigYaml([{name: 'h', server: 'https://home:2'}], 'h'))
      expect(resolve({env: {KUBECONFIG: ''}, home}).server).to.equal('https://home:2')
    })

    // kubectl: "the first file to set a particular value or map key wins", current-context included.
    it('keeps the current-context of the first file that sets one, as kubectl does', () => {
      const first = file('first-wins/first.yaml', kubeconfigYaml([{name: 'one', server: 'https://one:1'}], 'one'))
      const second = file('first-wins/second.yaml', kubeconfigYaml([{name: 'two', server: 'https://two:2'}], 'two'))
      const resolved = resolve({env: {KUBECONFIG: [first, second].join(delimiter)}})
      expect(resolved.server).to.equal('https://one:1')
    })

    // kubectl: "If two files specify a red-user, use only values from the first file's red-user."
    it('lets the first file win when two files define the same names, as kubectl does', () => {
      const first = file('dup/first.yaml', kubeconfigYaml([{entry: 'shared', name: 'one', server: 'https://one:1'}], 'one'))
      const second = file('dup/second.yaml', kubeconfigYaml([{entry: 'shared', name: 'two', server: 'https://two:2'}]))
      const resolved = resolve({env: {KUBECONFIG: [first, second].join(delimiter)}})
      expect(resolved.server).to.equal('https://one:1')
    })
  })

  describe('~/.kube/config', () => {
    it('is used under the given home', () => {
      const home = join(root, 'home-a')
      const path = file('home-a/.kube/config', kubeconfigYaml([{name: 'h', server: 'https://home-a:6443'}], 'h'))
      const resolved = resolve({home})
      expect(resolved.server).to.equal('https://home-a:6443')
      expect(resolved.origin).to.equal(`kubeconfig ${path} (context h)`)
    })
  })

  describe('nothing found', () => {
    it('fails with a ConfigError mentioning --kubeconfig', () => {
      const error = configErrorFrom(() => resolve({}))
      expect(error.message).to.include('no Kubernetes configuration found')
      expect(error.message).to.include('--kubeconfig')
      expect(error.message).to.include('KUBECONFIG')
    })

    it('does not go in-cluster without KUBERNETES_SERVICE_HOST even when the token exists', () => {
      const saRoot = join(root, 'sa-no-host')
      file('sa-no-host/var/run/secrets/kubernetes.io/serviceaccount/token', 'tok')
      const error = configErrorFrom(() => resolve({serviceAccountRoot: saRoot}))
      expect(error.message).to.include('no Kubernetes configuration found')
    })

    it('does not go in-cluster without the service-account token', () => {
      const error = configErrorFrom(() => resolve({env: {KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443'}}))
      expect(error.message).to.include('no Kubernetes configuration found')
    })
  })

  describe('in-cluster', () => {
    let saRoot: string
    const env = {KUBERNETES_SERVICE_HOST: '10.96.7.7', KUBERNETES_SERVICE_PORT: '6443'}
    before(() => {
      saRoot = join(root, 'sa')
      const dir = 'sa/var/run/secrets/kubernetes.io/serviceaccount'
      file(`${dir}/token`, 'service-account-token')
      file(`${dir}/ca.crt`, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n')
      file(`${dir}/namespace`, 'nfd')
    })

    it('is used when nothing else is configured and says so in the origin', () => {
      const resolved = resolve({env, serviceAccountRoot: saRoot})
      expect(resolved.origin).to.equal('in-cluster service account')
      expect(resolved.cluster.caFile).to.equal(`${saRoot}/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`)
    })

    it('builds the server URL from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT of the given env', () => {
      expect(resolve({env, serviceAccountRoot: saRoot}).server).to.equal('https://10.96.7.7:6443')
    })

    it('fails with a ConfigError for --context', () => {
      const error = configErrorFrom(() => resolve({context: 'dev', env, serviceAccountRoot: saRoot}))
      expect(error.message).to.include('--context')
      expect(error.message).to.include('in-cluster')
    })

    it('is not used when ~/.kube/config exists', () => {
      const home = join(root, 'home-over-sa')
      file('home-over-sa/.kube/config', kubeconfigYaml([{name: 'h', server: 'https://home:1'}], 'h'))
      expect(resolve({env, home, serviceAccountRoot: saRoot}).server).to.equal('https://home:1')
    })
  })
})
