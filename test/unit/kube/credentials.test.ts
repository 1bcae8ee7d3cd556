import {expect} from 'chai'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Readable} from 'node:stream'

import {ConfigError} from '../../../src/lib/errors.js'
import {Credentials} from '../../../src/lib/kube/credentials.js'
import type {ExecIo} from '../../../src/lib/kube/exec-plugin.js'
import {resolveKubeConfig, type ResolvedKubeConfig} from '../../../src/lib/kube/kubeconfig-resolver.js'
import {sink, type Sink} from '../../support/sink.js'
import {rejection} from '../../support/thrown.js'

type Raw = Record<string, unknown>

/**
 * An exec credential plugin. It appends a line to the file named by PLUGIN_CALLS (one line per run), and prints
 * an ExecCredential whose token is "<PLUGIN_GREETING>.<run number>.<base64 of KUBERNETES_EXEC_INFO>.<first arg>", so a
 * test can see the invocation count, the env entries of the kubeconfig and the exec info the plugin was given.
 * The expiry comes from PLUGIN_EXPIRY (omitted when empty); PLUGIN_CERT/PLUGIN_KEY, when set, become
 * clientCertificateData/clientKeyData.
 */
const pluginScript = `#!/bin/sh
echo run >> "$PLUGIN_CALLS"
n=$(wc -l < "$PLUGIN_CALLS" | tr -d ' ')
info=$(printf '%s' "$KUBERNETES_EXEC_INFO" | base64 | tr -d '\\n')
extra=""
if [ -n "$PLUGIN_EXPIRY" ]; then extra="$extra,\\"expirationTimestamp\\":\\"$PLUGIN_EXPIRY\\""; fi
if [ -n "$PLUGIN_CERT" ]; then extra="$extra,\\"clientCertificateData\\":\\"$PLUGIN_CERT\\",\\"clientKeyData\\":\\"$PLUGIN_KEY\\""; fi
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s.%s.%s.%s"%s}}\\n' "\${PLUGIN_API_VERSION:-client.authentication.k8s.io/v1}" "$PLUGIN_GREETING" "$n" "$info" "$1" "$extra"
`

interface PluginToken {
  readonly greeting: string
  readonly run: number
  readonly execInfo: {apiVersion: string; kind: string; spec: {interactive: boolean}}
  readonly arg: string
}

function parsePluginToken(authorization: string | string[] | undefined): PluginToken {
  expect(authorization, 'one Authorization header').to.not.be.an('array')
  expect(authorization, 'Authorization header').to.be.a('string')
  expect(authorization).to.match(/^Bearer /)
  const [greeting, run, info, arg] = (authorization as string).slice('Bearer '.length).split('.')
  return {arg, execInfo: JSON.parse(Buffer.from(info, 'base64').toString('utf8')), greeting, run: Number(run)}
}

const v1 = 'client.authentication.k8s.io/v1'

/** A credentials problem is a ConfigError: exit 2. */
async function configRejection(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await rejection(promise, ConfigError)
  expect(error.exitCode).to.equal(2)
  return error
}

describe('Credentials', () => {
  let root: string
  let emptyHome: string
  let noServiceAccount: string
  /** A fresh directory per test; kubeconfigs, certificates and plugins go here. */
  let dir: string

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'nfdctl-credentials-'))
    emptyHome = mkdtempSync(join(root, 'home-'))
    noServiceAccount = mkdtempSync(join(root, 'sa-'))
  })

  after(() => {
    rmSync(root, {force: true, recursive: true})
  })

  beforeEach(() => {
    dir = mkdtempSync(join(root, 'case-'))
    stderr = sink()
  })

  function write(name: string, content: Buffer | string, mode?: number): string {
    const path = join(dir, name)
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, content)
    if (mode !== undefined) chmodSync(path, mode)
    return path
  }

  /** Writes a one-context kubeconfig (JSON is YAML) with the given cluster and user fields. */
  function kubeconfig(options: {cluster?: Raw; user?: Raw} = {}, name = 'kubeconfig.yaml'): string {
    const doc = {
      apiVersion: 'v1',
      clusters: [{cluster: {server: 'https://k8s.example:6443', ...options.cluster}, name: 'c'}],
      contexts: [{context: {cluster: 'c', user: 'u'}, name: 'ctx'}],
      'current-context': 'ctx',
      kind: 'Config',
      users: [{name: 'u', user: options.user ?? {}}],
    }
    return write(name, JSON.stringify(doc, null, 2))
  }

  function resolve(path: string): ResolvedKubeConfig {
    return resolveKubeConfig({env: {}, home: emptyHome, kubeconfig: path, serviceAccountRoot: noServiceAccount})
  }

  /** What exec plugins wrote to stderr in this test (kubectl shows it to the user). */
  let stderr: Sink

  async function load(path: string, io: Partial<ExecIo> = {}): Promise<Credentials> {
    return Credentials.load(resolve(path), {io: {stderr, stdin: Readable.from([]), stdinIsTerminal: false, ...io}})
  }

  /** Some bytes that are not text, so a wrong decoding cannot pass by accident. */
  function someBytes(seed: number): Buffer {
    return Buffer.from(Array.from({length: 300}, (_, i) => (i * 37 + seed) % 256))
  }

  describe('TLS material', () => {
    it('reads client certificate, client key and CA from files', async () => {
      const cert = write('pki/client.crt', someBytes(1))
      const key = write('pki/client.key', someBytes(2))
      const ca = write('pki/ca.crt', someBytes(3))
      const credentials = await load(kubeconfig({cluster: {'certificate-authority': ca}, user: {'client-certificate': cert, 'client-key': key}}))
      expect(credentials.tls.cert?.equals(someBytes(1))).to.equal(true)
      expect(credentials.tls.key?.equals(someBytes(2))).to.equal(true)
      expect(credentials.tls.ca?.equals(someBytes(3))).to.equal(true)
    })

    it('decodes inline base64 *-data to the same bytes as the files', async () => {
      const fromFiles = await load(
        kubeconfig(
          {
            cluster: {'certificate-authority': write('ca.crt', someBytes(3))},
            user: {'client-certificate': write('client.crt', someBytes(1)), 'client-key': write('client.key', someBytes(2))},
          },
          'files.yaml',
        ),
      )
      const fromData = await load(
        kubeconfig(
          {
            cluster: {'certificate-authority-data': someBytes(3).toString('base64')},
            user: {'client-certificate-data': someBytes(1).toString('base64'), 'client-key-data': someBytes(2).toString('base64')},
          },
          'data.yaml',
        ),
      )
      expect(fromData.tls.cert?.equals(fromFiles.tls.cert!)).to.equal(true)
      expect(fromData.tls.key?.equals(fromFiles.tls.key!)).to.equal(true)
      expect(fromData.tls.ca?.equals(fromFiles.tls.ca!)).to.equal(true)
      expect(fromData.tls.cert?.equals(someBytes(1))).to.equal(true)
    })

    it('prefers *-data over the file when a kubeconfig has both, as kubectl does', async () => {
      const credentials = await load(kubeconfig({user: {'client-certificate': write('client.crt', someBytes(1)), 'client-certificate-data': someBytes(9).toString('base64')}}))
      expect(credentials.tls.cert?.equals(someBytes(9))).to.equal(true)
    })

    it('resolves relative paths against the directory of the kubeconfig, not the working directory', async () => {
      write('certs/client.crt', someBytes(1))
      write('certs/client.key', someBytes(2))
      write('certs/ca.crt', someBytes(3))
      write('tokens/token', 'relative-token\n')
      const path = write(
        'kubeconfig.yaml',
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '- name: c',
          '  cluster:',
          '    server: https://k8s.example:6443',
          '    certificate-authority: certs/ca.crt',
          'users:',
          '- name: u',
          '  user:',
          '    client-certificate: certs/client.crt',
          '    client-key: ./certs/client.key',
          '    tokenFile: tokens/token',
          'contexts:',
          '- name: ctx',
          '  context: {cluster: c, user: u}',
          'current-context: ctx',
          '',
        ].join('\n'),
      )
      expect(process.cwd()).to.not.equal(dir)
      const resolved = resolve(path)
      expect(resolved.user.clientCertificate).to.equal(join(dir, 'certs/client.crt'))
      expect(resolved.user.clientKey).to.equal(join(dir, 'certs/client.key'))
      expect(resolved.cluster.caFile).to.equal(join(dir, 'certs/ca.crt'))
      const credentials = await Credentials.load(resolved)
      expect(credentials.tls.cert?.equals(someBytes(1))).to.equal(true)
      expect(credentials.tls.key?.equals(someBytes(2))).to.equal(true)
      expect(credentials.tls.ca?.equals(someBytes(3))).to.equal(true)
      expect((await credentials.headers()).Authorization).to.equal('Bearer relative-token')
    })

    it('fails with a ConfigError naming a missing CA file', async () => {
      const missing = join(dir, 'no-such-ca.crt')
      const error = await configRejection(load(kubeconfig({cluster: {'certificate-authority': missing}})))
      expect(error.message).to.include(missing)
      expect(error.message).to.include('certificate authority')
    })

    it('fails with a ConfigError naming a missing client key file', async () => {
      const missing = join(dir, 'no-such.key')
      const error = await configRejection(load(kubeconfig({user: {'client-certificate': write('client.crt', someBytes(1)), 'client-key': missing}})))
      expect(error.message).to.include(missing)
      expect(error.message).to.include('client key')
    })

    it('sets rejectUnauthorized to false for insecure-skip-tls-verify', async () => {
      const credentials = await load(kubeconfig({cluster: {'insecure-skip-tls-verify': true}}))
      expect(credentials.tls.rejectUnauthorized).to.equal(false)
    })

    it('leaves certificate verification on by default', async () => {
      const credentials = await load(kubeconfig())
      expect(credentials.tls.rejectUnauthorized).to.not.equal(false)
      expect(credentials.tls.ca).to.equal(undefined)
      expect(credentials.tls.cert).to.equal(undefined)
      expect(credentials.tls.servername).to.equal(undefined)
    })

    it('passes tls-server-name on as servername', async () => {
      const credentials = await load(kubeconfig({cluster: {'tls-server-name': 'kubernetes.default.svc'}}))
      expect(credentials.tls.servername).to.equal('kubernetes.default.svc')
    })
  })

  describe('static credentials', () => {
    it('sends no Authorization header for a user without credentials', async () => {
      const headers = await (await load(kubeconfig())).headers()
      expect(headers).to.deep.equal({})
    })

    it('sends a static token as a bearer token', async () => {
      const headers = await (await load(kubeconfig({user: {token: 'static-token'}}))).headers()
      expect(headers).to.deep.equal({Authorization: 'Bearer static-token'})
    })

    it('sends username and password as basic auth', async () => {
      const headers = await (await load(kubeconfig({user: {password: 's3cret', username: 'admin'}}))).headers()
      // base64("admin:s3cret")
      expect(headers.Authorization).to.equal('Basic YWRtaW46czNjcmV0')
    })

    it('sends a password containing a colon unchanged', async () => {
      const headers = await (await load(kubeconfig({user: {password: 'a:b', username: 'u'}}))).headers()
      expect(Buffer.from(String(headers.Authorization).replace(/^Basic /, ''), 'base64').toString('utf8')).to.equal('u:a:b')
    })

    it('sends as, as-uid, as-groups and as-user-extra as the Impersonate-* headers (one line per group and value)', async () => {
      const user = {as: 'alice', 'as-groups': ['gc-readers', 'system:authenticated'], 'as-uid': 'u-42', 'as-user-extra': {'reason/why': ['audit', 'ops'], scopes: ['view']}, token: 'tok'}
      const headers = await (await load(kubeconfig({user}))).headers()
      expect(headers).to.deep.equal({
        Authorization: 'Bearer tok',
        'Impersonate-Extra-reason%2Fwhy': ['audit', 'ops'], // client-go's headerKeyEscape
        'Impersonate-Extra-scopes': ['view'],
        'Impersonate-Group': ['gc-readers', 'system:authenticated'],
        'Impersonate-Uid': 'u-42',
        'Impersonate-User': 'alice',
      })
    })

    it('sends `as` as the Impersonate-User header next to the credentials', async () => {
      const headers = await (await load(kubeconfig({user: {as: 'someone', token: 'tok'}}))).headers()
      expect(headers).to.deep.equal({Authorization: 'Bearer tok', 'Impersonate-User': 'someone'})
    })
  })

  describe('tokenFile', () => {
    it('reads the token from the file, trimmed', async () => {
      const tokenFile = write('token', 'file-token-1\n')
      const headers = await (await load(kubeconfig({user: {tokenFile}}))).headers()
      expect(headers.Authorization).to.equal('Bearer file-token-1')
    })

    it('keeps the token for a while, and re-reads the file on refresh', async () => {
      const tokenFile = write('token', 'file-token-1\n')
      const credentials = await load(kubeconfig({user: {tokenFile}}))
      expect((await credentials.headers()).Authorization).to.equal('Bearer file-token-1')
      writeFileSync(tokenFile, 'file-token-2\n')
      expect((await credentials.headers()).Authorization).to.equal('Bearer file-token-1')
      expect((await credentials.headers(true)).Authorization).to.equal('Bearer file-token-2')
      expect((await credentials.headers()).Authorization).to.equal('Bearer file-token-2')
    })

    it('fails with a ConfigError naming a token file that does not exist', async () => {
      const missing = join(dir, 'no-such-token')
      const credentials = await load(kubeconfig({user: {tokenFile: missing}}))
      const error = await configRejection(credentials.headers())
      expect(error.message).to.include(missing)
      expect(error.message).to.include('token file')
    })
  })

  describe('exec credential plugins', () => {
    let plugin: string
    let callsFile: string

    beforeEach(() => {
      plugin = write('bin/plugin.sh', pluginScript, 0o755)
      callsFile = join(dir, 'calls')
    })

    function calls(): number {
      return existsSync(callsFile)
        ? readFileSync(callsFile, 'utf8')
            .split('\n')
            .filter((l) => l !== '').length
        : 0
    }

    function execUser(options: {expiry?: string; apiVersion?: string; command?: string; env?: Raw} = {}): Raw {
      return {
        exec: {
          apiVersion: options.apiVersion ?? 'client.authentication.k8s.io/v1',
          args: ['first-arg'],
          command: options.command ?? plugin,
          env: Object.entries({PLUGIN_CALLS: callsFile, PLUGIN_EXPIRY: options.expiry ?? '', PLUGIN_GREETING: 'hello', ...options.env}).map(([name, value]) => ({
            name,
            value,
          })),
          interactiveMode: 'Never',
        },
      }
    }

    const farFuture = (): string => new Date(Date.now() + 3_600_000).toISOString()

    it('sends the plugin token, and gives the plugin its args, its env entries and KUBERNETES_EXEC_INFO', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: farFuture()})}))
      const token = parsePluginToken((await credentials.headers()).Authorization)
      expect(token.greeting).to.equal('hello')
      expect(token.arg).to.equal('first-arg')
      expect(token.execInfo).to.deep.equal({apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', spec: {interactive: false}})
    })

    it('puts the apiVersion of the kubeconfig into KUBERNETES_EXEC_INFO', async () => {
      const credentials = await load(kubeconfig({user: execUser({apiVersion: 'client.authentication.k8s.io/v1beta1', env: {PLUGIN_API_VERSION: 'client.authentication.k8s.io/v1beta1'}})}))
      const token = parsePluginToken((await credentials.headers()).Authorization)
      expect(token.execInfo.apiVersion).to.equal('client.authentication.k8s.io/v1beta1')
    })

    it('runs the plugin once, at load, for two requests while its token is far from expiry', async () => {
      const before = calls()
      const credentials = await load(kubeconfig({user: execUser({expiry: farFuture()})}))
      const first = await credentials.headers()
      expect(calls()).to.equal(before + 1)
      const second = await credentials.headers()
      expect(calls()).to.equal(before + 1)
      expect(second).to.deep.equal(first)
    })

    it('runs the plugin again for every request once its token has expired', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: '2000-01-01T00:00:00Z'})}))
      const before = calls()
      const first = parsePluginToken((await credentials.headers()).Authorization)
      const second = parsePluginToken((await credentials.headers()).Authorization)
      expect(calls()).to.equal(before + 2)
      expect(second.run).to.equal(first.run + 1)
    })

    it('renews a token that expires within the next 10 seconds', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: new Date(Date.now() + 5000).toISOString()})}))
      const before = calls()
      await credentials.headers()
      await credentials.headers()
      expect(calls()).to.equal(before + 2)
    })

    it('runs the plugin again on refresh even when its token has not expired', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: farFuture()})}))
      const first = parsePluginToken((await credentials.headers()).Authorization)
      const before = calls()
      const refreshed = parsePluginToken((await credentials.headers(true)).Authorization)
      expect(calls()).to.equal(before + 1)
      expect(refreshed.run).to.equal(first.run + 1)
      // The refreshed token is cached in turn.
      expect(parsePluginToken((await credentials.headers()).Authorization).run).to.equal(refreshed.run)
      expect(calls()).to.equal(before + 1)
    })

    it('keeps a token without expirationTimestamp until a refresh', async () => {
      const before = calls()
      const credentials = await load(kubeconfig({user: execUser()}))
      await credentials.headers()
      await credentials.headers()
      expect(calls()).to.equal(before + 1)
      await credentials.headers(true)
      expect(calls()).to.equal(before + 2)
    })

    it('sends Impersonate-User next to the plugin token', async () => {
      const user = {...execUser({expiry: farFuture()}), as: 'someone'}
      const headers = await (await load(kubeconfig({user}))).headers()
      expect(headers['Impersonate-User']).to.equal('someone')
      expect(parsePluginToken(headers.Authorization).greeting).to.equal('hello')
    })

    it('uses a client certificate and key handed out by the plugin for TLS', async () => {
      const pem = '-----BEGIN CERTIFICATE-----MIIBplugin-----END CERTIFICATE-----'
      const keyPem = '-----BEGIN PRIVATE KEY-----MIIEplugin-----END PRIVATE KEY-----'
      const credentials = await load(kubeconfig({user: execUser({env: {PLUGIN_CERT: pem, PLUGIN_KEY: keyPem}})}))
      expect(credentials.tls.cert?.toString('utf8')).to.equal(pem)
      expect(credentials.tls.key?.toString('utf8')).to.equal(keyPem)
    })

    it('fails with a ConfigError naming the command when the plugin exits 1', async () => {
      const failing = write('bin/failing.sh', '#!/bin/sh\necho "no credentials for you" >&2\nexit 1\n', 0o755)
      const error = await configRejection(load(kubeconfig({user: {exec: {apiVersion: v1, command: failing, interactiveMode: 'Never'}}})))
      expect(error.message).to.include(`"${failing}"`)
      expect(error.message).to.include('failed with exit code 1')
      expect(stderr.text()).to.equal('no credentials for you\n')
    })

    it('fails with a ConfigError naming the command when the plugin prints no JSON', async () => {
      const garbage = write('bin/garbage.sh', '#!/bin/sh\necho "this is not json"\n', 0o755)
      const error = await configRejection(load(kubeconfig({user: {exec: {apiVersion: v1, command: garbage, interactiveMode: 'Never'}}})))
      expect(error.message).to.include(`"${garbage}"`)
    })

    it('fails with a ConfigError naming the command when it does not exist', async () => {
      const missing = join(dir, 'bin/no-such-plugin')
      const error = await configRejection(load(kubeconfig({user: {exec: {apiVersion: v1, command: missing, interactiveMode: 'Never'}}})))
      expect(error.message).to.include(`"${missing}" not found`)
    })

    it('fails with a ConfigError from headers() when the plugin starts failing after load', async () => {
      const flag = write('fail-now', 'no')
      const flaky = write(
        'bin/flaky.sh',
        `#!/bin/sh\nif [ "$(cat '${flag}')" = yes ]; then exit 1; fi\nprintf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"ok","expirationTimestamp":"2000-01-01T00:00:00Z"}}'\n`,
        0o755,
      )
      const credentials = await load(kubeconfig({user: {exec: {apiVersion: v1, command: flaky, interactiveMode: 'Never'}}}))
      expect((await credentials.headers()).Authorization).to.equal('Bearer ok')
      writeFileSync(flag, 'yes')
      const error = await configRejection(credentials.headers())
      expect(error.message).to.include(`"${flaky}"`)
    })

    // Bug: kubectl (client-go GetAuthInfoFileReferences) resolves an exec command that contains a path separator
    // against the kubeconfig's directory; readKubeconfig passes it through unchanged, so execFile resolves it against
    // the working directory of nfdctl and the plugin is not found.
    it('resolves a relative exec command against the directory of the kubeconfig, as kubectl does', async () => {
      const path = kubeconfig({user: execUser({command: './bin/plugin.sh', expiry: farFuture()})})
      expect(process.cwd()).to.not.equal(dir)
      const credentials = await load(path)
      expect(parsePluginToken((await credentials.headers()).Authorization).greeting).to.equal('hello')
    })

    // Bug: Credentials.load runs the plugin (to learn about client certificates) but throws its token away, so the
    // first headers() runs the plugin a second time: every connection pays for two plugin runs.
    it('runs the plugin once for load() and the first request when the token is still valid', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: farFuture()})}))
      const token = parsePluginToken((await credentials.headers()).Authorization)
      expect(calls()).to.equal(1)
      expect(token.run).to.equal(1)
    })

    // Bug: headers() has no in-flight de-duplication, so concurrent requests (gc deletes through p-limit) each start
    // the plugin when the cached token is missing or expired.
    it('runs the plugin at most once for concurrent requests', async () => {
      const credentials = await load(kubeconfig({user: execUser({expiry: farFuture()})}))
      const before = calls()
      const all = await Promise.all([credentials.headers(), credentials.headers(), credentials.headers(), credentials.headers()])
      expect(calls()).to.be.at.most(before + 1)
      expect(new Set(all.map((h) => h.Authorization)).size).to.equal(1)
    })
  })
})
