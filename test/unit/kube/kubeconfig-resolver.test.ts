import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'

import {ConfigError} from '../../../src/lib/errors.js'
import {resolveKubeConfig, type KubeConfigSource} from '../../../src/lib/kube/kubeconfig-resolver.js'
import {thrownBy} from '../../support/thrown.js'

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

/** A kubeconfig problem is a ConfigError: exit 2. */
function configErrorFrom(fn: () => unknown): ConfigError {
  const error = thrownBy(fn, ConfigError)
  expect(error.exitCode).to.equal(2)
  return error
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

describe('resolveKubeConfig: file contents', () => {
  let root: string
  let emptyHome: string
  let noServiceAccount: string
  let dir: string

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'nfdctl-kubeconfig-contents-'))
    emptyHome = mkdtempSync(join(root, 'home-'))
    noServiceAccount = mkdtempSync(join(root, 'sa-'))
  })

  after(() => {
    rmSync(root, {force: true, recursive: true})
  })

  beforeEach(() => {
    dir = mkdtempSync(join(root, 'case-'))
  })

  function write(name: string, text: string): string {
    const path = join(dir, name)
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, text)
    return path
  }

  function resolve(path: string, context?: string): ReturnType<typeof resolveKubeConfig> {
    return resolveKubeConfig({context, env: {}, home: emptyHome, kubeconfig: path, serviceAccountRoot: noServiceAccount})
  }

  /** Two contexts: "good" (user "good", token auth) and "old" (user "old", with the given user body). */
  function twoUsers(oldUser: string[]): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: c',
      '  cluster: {server: "https://k8s.example:6443"}',
      'users:',
      '- name: good',
      '  user: {token: good-token}',
      '- name: old',
      '  user:',
      ...oldUser.map((line) => `    ${line}`),
      'contexts:',
      '- name: good',
      '  context: {cluster: c, user: good}',
      '- name: old',
      '  context: {cluster: c, user: old}',
      'current-context: good',
      '',
    ].join('\n')
  }

  describe('malformed documents', () => {
    it('reports an empty file as having no current context', () => {
      const path = write('empty.yaml', '')
      const error = configErrorFrom(() => resolve(path))
      expect(error.message).to.include(`kubeconfig ${path} has no current context`)
      expect(error.message).to.include('available: none')
    })

    it('reports a file holding only a comment as having no current context', () => {
      const path = write('comment.yaml', '# nothing here yet\n')
      expect(configErrorFrom(() => resolve(path)).message).to.include('has no current context')
    })

    it('fails with a ConfigError for a YAML list at the top level', () => {
      const path = write('list.yaml', '- name: c\n  cluster: {server: "https://x:1"}\n')
      const error = configErrorFrom(() => resolve(path))
      expect(error.message).to.include(path)
      expect(error.message).to.include('not a kubeconfig mapping')
    })

    it('fails with a ConfigError for a scalar at the top level', () => {
      const path = write('scalar.yaml', 'just a string\n')
      expect(configErrorFrom(() => resolve(path)).message).to.include('not a kubeconfig mapping')
    })

    it('fails with a ConfigError when users is not a list', () => {
      const path = write('users-map.yaml', 'users: {u: {token: t}}\n')
      const error = configErrorFrom(() => resolve(path))
      expect(error.message).to.include('"users" must be a list')
    })

    it('fails with a ConfigError naming the entry without a name', () => {
      const path = write('nameless.yaml', 'clusters:\n- cluster: {server: "https://x:1"}\n')
      expect(configErrorFrom(() => resolve(path)).message).to.include('clusters[0] has no name')
    })

    it('fails with a ConfigError when the context names no cluster with a server', () => {
      const path = write('no-server.yaml', 'clusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n')
      const error = configErrorFrom(() => resolve(path))
      expect(error.message).to.include('context "x"')
      expect(error.message).to.include('names no cluster with a server')
    })
  })

  describe('cluster and user fields', () => {
    it('reads insecure-skip-tls-verify, tls-server-name, CA data, as, basic auth and exec', () => {
      const path = write(
        'full.yaml',
        [
          'clusters:',
          '- name: c',
          '  cluster:',
          '    server: https://k8s.example:6443',
          '    insecure-skip-tls-verify: true',
          '    tls-server-name: api.internal',
          '    certificate-authority-data: Q0E=',
          'users:',
          '- name: u',
          '  user:',
          '    username: admin',
          '    password: s3cret',
          '    as: someone',
          '    exec:',
          '      apiVersion: client.authentication.k8s.io/v1beta1',
          '      command: kubectl-oidc_login',
          '      args: [get-token, --issuer=https://issuer]',
          '      env:',
          '      - {name: FOO, value: bar}',
          'contexts:',
          '- name: x',
          '  context: {cluster: c, user: u}',
          'current-context: x',
          '',
        ].join('\n'),
      )
      const {cluster, user} = resolve(path)
      expect(cluster).to.include({caData: 'Q0E=', insecureSkipTlsVerify: true, server: 'https://k8s.example:6443', tlsServerName: 'api.internal'})
      expect(user).to.include({password: 's3cret', username: 'admin'})
      expect(user.impersonate).to.deep.equal({extra: {}, groups: [], uid: undefined, user: 'someone'})
      // A bare command is looked up on PATH, so it stays as written.
      expect(user.exec).to.deep.equal({
        apiVersion: 'client.authentication.k8s.io/v1beta1',
        args: ['get-token', '--issuer=https://issuer'],
        command: 'kubectl-oidc_login',
        env: [{name: 'FOO', value: 'bar'}],
        installHint: undefined,
        interactiveMode: undefined,
        provideClusterInfo: false,
      })
    })

    it('does not skip TLS verification unless insecure-skip-tls-verify is true', () => {
      const path = write('secure.yaml', 'clusters:\n- name: c\n  cluster: {server: "https://x:1"}\ncontexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n')
      expect(resolve(path).cluster.insecureSkipTlsVerify).to.equal(false)
    })

    it('resolves relative file paths against the directory of the kubeconfig and keeps absolute ones', () => {
      const absoluteKey = join(root, 'elsewhere', 'client.key')
      const path = write(
        'conf/kubeconfig',
        [
          'clusters:',
          '- name: c',
          '  cluster: {server: "https://x:1", certificate-authority: ../pki/ca.crt}',
          'users:',
          '- name: u',
          '  user:',
          '    client-certificate: certs/client.crt',
          `    client-key: ${absoluteKey}`,
          '    tokenFile: ./token',
          'contexts:',
          '- name: x',
          '  context: {cluster: c, user: u}',
          'current-context: x',
          '',
        ].join('\n'),
      )
      const {cluster, user} = resolve(path)
      expect(cluster.caFile).to.equal(join(dir, 'pki/ca.crt'))
      expect(user.clientCertificate).to.equal(join(dir, 'conf/certs/client.crt'))
      expect(user.clientKey).to.equal(absoluteKey)
      expect(user.tokenFile).to.equal(join(dir, 'conf/token'))
    })

    // Bug: client-go (GetAuthInfoFileReferences) resolves an exec command containing a path separator against the
    // kubeconfig's directory; readKubeconfig keeps "./bin/get-token", which then depends on nfdctl's working directory.
    it('resolves a relative exec command with a path separator against the directory of the kubeconfig, as kubectl does', () => {
      const path = write(
        'conf/kubeconfig',
        'clusters:\n- name: c\n  cluster: {server: "https://x:1"}\nusers:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: ./bin/get-token}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n',
      )
      expect(resolve(path).user.exec?.command).to.equal(join(dir, 'conf/bin/get-token'))
    })
  })

  describe('auth-provider', () => {
    it('fails with a ConfigError pointing to exec credential plugins for auth-provider gcp', () => {
      const path = write('gcp.yaml', twoUsers(['auth-provider: {name: gcp, config: {cmd-path: /usr/bin/gcloud}}']))
      const error = configErrorFrom(() => resolve(path, 'old'))
      expect(error.message).to.include('exec credential plugin')
      expect(error.message).to.include('"gcp"')
      expect(error.message).to.include('"old"')
      expect(error.message).to.include(path)
    })

    // Bug: readKubeconfig throws for an auth-provider on any user of the file, while kubectl only fails when the
    // selected context uses that user; one stale entry makes every context of the kubeconfig unusable.
    it('does not fail for a context whose user does not use the auth-provider', () => {
      const path = write('gcp-unused.yaml', twoUsers(['auth-provider: {name: gcp}']))
      const resolved = resolve(path)
      expect(resolved.context).to.equal('good')
      expect(resolved.user.token).to.equal('good-token')
    })

    // Bug: `auth-provider:` with no value parses to null; `(null as Raw).name` throws a TypeError, not a ConfigError.
    it('fails with a ConfigError, not a TypeError, for an auth-provider without a value', () => {
      const path = write('null-provider.yaml', twoUsers(['auth-provider:', 'token: t']))
      const error = configErrorFrom(() => resolve(path, 'old'))
      expect(error.message).to.include('exec credential plugin')
    })
  })
  describe('what kubectl reads beyond the basics', () => {
    /** One context "x" with the given cluster and user bodies (JSON is YAML). */
    function one(cluster: Record<string, unknown>, user: Record<string, unknown>, context: Record<string, unknown> = {}): string {
      return write(
        'k.yaml',
        JSON.stringify({
          clusters: [{cluster: {server: 'https://k8s.example:6443', ...cluster}, name: 'c'}],
          contexts: [{context: {cluster: 'c', user: 'u', ...context}, name: 'x'}],
          'current-context': 'x',
          users: [{name: 'u', user}],
        }),
      )
    }

    it('reads proxy-url as a URL', () => {
      expect(resolve(one({'proxy-url': 'socks5://127.0.0.1:1080'}, {})).cluster.proxyUrl?.href).to.equal('socks5://127.0.0.1:1080')
    })

    it('refuses a proxy-url scheme kubectl refuses, naming the cluster', () => {
      const error = configErrorFrom(() => resolve(one({'proxy-url': 'ftp://p:21'}, {})))
      expect(error.message).to.include('cluster "c": proxy-url "ftp://p:21" has unsupported scheme "ftp"')
    })

    it("reads the cluster's exec extension", () => {
      const cluster = {
        extensions: [
          {extension: {audience: 'a'}, name: 'client.authentication.k8s.io/exec'},
          {extension: {x: 1}, name: 'other'},
        ],
      }
      expect(resolve(one(cluster, {})).cluster.execExtension).to.deep.equal({audience: 'a'})
    })

    it("reads the context's namespace", () => {
      expect(resolve(one({}, {}, {namespace: 'team-a'})).namespace).to.equal('team-a')
      expect(resolve(one({}, {})).namespace).to.equal(undefined)
    })

    it('reads as, as-groups, as-uid and as-user-extra', () => {
      const user = {as: 'alice', 'as-groups': ['g1', 'g2'], 'as-uid': '42', 'as-user-extra': {scopes: ['view', 'edit']}, token: 't'}
      expect(resolve(one({}, user)).user.impersonate).to.deep.equal({extra: {scopes: ['view', 'edit']}, groups: ['g1', 'g2'], uid: '42', user: 'alice'})
    })

    it('refuses as-groups without as (the API server refuses groups without a user)', () => {
      expect(configErrorFrom(() => resolve(one({}, {'as-groups': ['g1']}))).message).to.include('need "as"')
    })

    it('refuses as-groups that is not a list of strings', () => {
      expect(configErrorFrom(() => resolve(one({}, {as: 'a', 'as-groups': 'g1'}))).message).to.include('as-groups must be a list of strings')
    })

    it('refuses exec of client.authentication.k8s.io/v1 without interactiveMode, as client-go', () => {
      const error = configErrorFrom(() => resolve(one({}, {exec: {apiVersion: 'client.authentication.k8s.io/v1', command: 'p'}})))
      expect(error.message).to.include('needs interactiveMode (Never, IfAvailable or Always)')
      expect(error.message).to.include('user "u"')
    })

    it('accepts exec of v1beta1 without interactiveMode (client-go defaults it to IfAvailable)', () => {
      expect(resolve(one({}, {exec: {apiVersion: 'client.authentication.k8s.io/v1beta1', command: 'p'}})).user.exec?.interactiveMode).to.equal(undefined)
    })

    it('refuses an unknown interactiveMode and a missing apiVersion', () => {
      expect(configErrorFrom(() => resolve(one({}, {exec: {apiVersion: 'client.authentication.k8s.io/v1', command: 'p', interactiveMode: 'Sometimes'}}))).message).to.include(
        'must be Never, IfAvailable or Always, got "Sometimes"',
      )
      expect(configErrorFrom(() => resolve(one({}, {exec: {command: 'p'}}))).message).to.include('exec needs an apiVersion')
    })

    it('reads installHint and provideClusterInfo', () => {
      const exec = {apiVersion: 'client.authentication.k8s.io/v1', command: 'p', installHint: 'brew install p', interactiveMode: 'Never', provideClusterInfo: true}
      expect(resolve(one({}, {exec})).user.exec).to.include({installHint: 'brew install p', interactiveMode: 'Never', provideClusterInfo: true})
    })

    it('accepts auth-provider oidc and remembers the file that defined the user', () => {
      const path = one({}, {'auth-provider': {config: {'client-id': 'k', 'id-token': 'a.b.c', 'idp-issuer-url': 'https://issuer'}, name: 'oidc'}})
      expect(resolve(path).user.oidc).to.deep.equal({config: {'client-id': 'k', 'id-token': 'a.b.c', 'idp-issuer-url': 'https://issuer'}, file: path, userName: 'u'})
    })

    it('refuses auth-provider oidc without idp-issuer-url or client-id, as client-go', () => {
      const error = configErrorFrom(() => resolve(one({}, {'auth-provider': {config: {'idp-issuer-url': 'https://issuer'}, name: 'oidc'}})))
      expect(error.message).to.include('auth-provider oidc needs client-id')
    })

    it('still refuses the removed providers (azure) with the way out', () => {
      expect(configErrorFrom(() => resolve(one({}, {'auth-provider': {name: 'azure'}}))).message)
        .to.include('"azure"')
        .and.include('switch it to an exec credential plugin')
    })
  })
})
