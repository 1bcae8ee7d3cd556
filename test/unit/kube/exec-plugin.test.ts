import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {chmodSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Readable} from 'node:stream'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

import {ConfigError} from '../../../src/lib/errors.js'
import {execInfo, isInteractive, runExecPlugin, type ExecIo} from '../../../src/lib/kube/exec-plugin.js'
import type {ClusterEntry, ExecConfig} from '../../../src/lib/kube/kubeconfig-reader.js'
import {sink} from '../../support/sink.js'
import {startedEarly} from '../../support/started-early.js'
import {rejection} from '../../support/thrown.js'

const v1 = 'client.authentication.k8s.io/v1'

/**
 * Says hello on stderr, reads one line of stdin (empty when stdin is not passed), and answers a token
 * "<line>|<base64 of KUBERNETES_EXEC_INFO>|<FROM_ENV>".
 */
const plugin = `#!/bin/sh
echo "plugin: open https://login.example to sign in" >&2
line=$(head -n 1 || true)
info=$(printf '%s' "$KUBERNETES_EXEC_INFO" | base64 | tr -d '\\n')
printf '{"apiVersion":"${v1}","kind":"ExecCredential","status":{"token":"%s|%s|%s"}}' "$line" "$info" "$FROM_ENV"
`

describe('exec credential plugins', () => {
  let dir: string
  let command: string
  const cluster: ClusterEntry = {server: 'https://k8s.example:6443'}

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nfdctl-exec-'))
    command = join(dir, 'plugin.sh')
    writeFileSync(command, plugin)
    chmodSync(command, 0o755)
  })

  after(() => rmSync(dir, {force: true, recursive: true}))

  async function run(exec: Partial<ExecConfig>, io: Partial<ExecIo> = {}, onCluster: ClusterEntry = cluster, caData?: Buffer) {
    const stderr = sink()
    const status = await runExecPlugin(
      {apiVersion: v1, command, interactiveMode: 'Never', ...exec},
      {caData, cluster: onCluster, where: 'test'},
      {
        stderr,
        stdin: Readable.from(['typed-at-the-terminal\n']),
        stdinIsTerminal: false,
        ...io,
      },
    )
    const [line, info, fromEnv] = status.token!.split('|')
    return {fromEnv, info: JSON.parse(Buffer.from(info, 'base64').toString('utf8')) as {spec: Record<string, unknown>}, line, stderr: stderr.text()}
  }

  describe('interactiveMode', () => {
    const table: Array<{mode: ExecConfig['interactiveMode']; terminal: boolean; interactive: boolean}> = [
      {interactive: false, mode: 'Never', terminal: true},
      {interactive: false, mode: 'Never', terminal: false},
      {interactive: true, mode: 'IfAvailable', terminal: true},
      {interactive: false, mode: 'IfAvailable', terminal: false},
      {interactive: true, mode: 'Always', terminal: true},
      {interactive: true, mode: undefined, terminal: true}, // v1beta1 without interactiveMode: client-go defaults to IfAvailable
    ]
    for (const row of table) {
      it(`${row.mode ?? '(unset)'} with${row.terminal ? '' : 'out'} a terminal: interactive ${row.interactive}`, () => {
        expect(isInteractive({command, interactiveMode: row.mode}, row.terminal, 'test')).to.equal(row.interactive)
      })
    }

    it('Always without a terminal is a ConfigError saying so', () => {
      expect(() => isInteractive({command, interactiveMode: 'Always'}, false, 'test')).to.throw(ConfigError, /interactiveMode Always, but standard input is not a terminal/)
    })

    it('passes stdin through and says interactive: true when it may ask (IfAvailable on a terminal)', async () => {
      const result = await run({interactiveMode: 'IfAvailable'}, {stdinIsTerminal: true})
      expect(result.line).to.equal('typed-at-the-terminal')
      expect(result.info.spec.interactive).to.equal(true)
    })

    it('does not pass stdin and says interactive: false for Never, even on a terminal', async () => {
      const result = await run({interactiveMode: 'Never'}, {stdinIsTerminal: true})
      expect(result.line).to.equal('')
      expect(result.info.spec.interactive).to.equal(false)
    })
  })

  describe('KUBERNETES_EXEC_INFO', () => {
    it('has no spec.cluster without provideClusterInfo', async () => {
      const {info} = await run({})
      expect(info).to.deep.equal({apiVersion: v1, kind: 'ExecCredential', spec: {interactive: false}})
    })

    it('has spec.cluster with server, CA data, TLS settings, proxy-url and the exec extension with provideClusterInfo', async () => {
      const full: ClusterEntry = {
        execExtension: {audience: 'k8s', region: 'eu-1'},
        insecureSkipTlsVerify: true,
        proxyUrl: new URL('socks5://127.0.0.1:1080'),
        server: 'https://k8s.example:6443',
        tlsServerName: 'api.internal',
      }
      const {info} = await run({provideClusterInfo: true}, {}, full, Buffer.from('ca-bytes'))
      expect(info.spec.cluster).to.deep.equal({
        'certificate-authority-data': Buffer.from('ca-bytes').toString('base64'),
        config: {audience: 'k8s', region: 'eu-1'},
        'insecure-skip-tls-verify': true,
        'proxy-url': 'socks5://127.0.0.1:1080',
        server: 'https://k8s.example:6443',
        'tls-server-name': 'api.internal',
      })
    })

    it('omits the fields a cluster does not set, as client-go (omitempty)', () => {
      const info = JSON.parse(execInfo({apiVersion: v1, command, provideClusterInfo: true}, cluster, undefined, false)) as {spec: {cluster: unknown}}
      expect(info.spec.cluster).to.deep.equal({server: 'https://k8s.example:6443'})
    })
  })

  it('passes the env entries to the plugin', async () => {
    expect((await run({env: [{name: 'FROM_ENV', value: 'entry-value'}]})).fromEnv).to.equal('entry-value')
  })

  it("shows the plugin's own stderr to the user", async () => {
    expect((await run({})).stderr).to.equal('plugin: open https://login.example to sign in\n')
  })

  it('shows the installHint when the command is missing', async () => {
    const missing = join(dir, 'kubectl-login')
    const error = await rejection(
      runExecPlugin(
        {apiVersion: v1, command: missing, installHint: 'Install it with:\n  brew install kubectl-login', interactiveMode: 'Never'},
        {cluster, where: 'kubeconfig k'},
        {
          stderr: sink(),
          stdin: 'inherit',
          stdinIsTerminal: false,
        },
      ),
    )
    expect(error).to.be.instanceOf(ConfigError)
    expect(error.message).to.include(`kubeconfig k: credential plugin "${missing}" not found`)
    expect(error.message).to.include('client-go credential plugin that is not installed')
    expect(error.message).to.match(/Install it with: brew install kubectl-login$/)
    expect(error.message).to.not.include('\n')
  })

  const missingCommandExit = startedEarly(async () => {
    const script = `import {runExecPlugin} from './src/lib/kube/exec-plugin.ts'
      await runExecPlugin({apiVersion: '${v1}', command: '/nonexistent/kubectl-login', interactiveMode: 'Never'}, {cluster: {server: 'https://127.0.0.1:1'}, where: 'k'}, {stderr: process.stderr, stdin: 'inherit', stdinIsTerminal: false}).catch(() => {})`
    const started = performance.now()
    await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {cwd: fileURLToPath(new URL('../../..', import.meta.url)), timeout: 20_000})
    return performance.now() - started
  })

  it('a missing command leaves nothing running: the process exits at once, not after the plugin timeout', async () => {
    expect(await missingCommandExit, 'ms until the process exited').to.be.below(10_000)
  })

  const answers: Array<{name: string; output: string; message: RegExp}> = [
    {message: /returned neither a token nor a client certificate and key/, name: 'no token and no certificate', output: `{"apiVersion":"${v1}","kind":"ExecCredential","status":{}}`},
    {message: /returned no status/, name: 'no status', output: `{"apiVersion":"${v1}","kind":"ExecCredential"}`},
    {
      message: /answered apiVersion "client.authentication.k8s.io\/v1beta1"/,
      name: 'another apiVersion',
      output: '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}',
    },
    {message: /certificate without its key/, name: 'a certificate without key', output: `{"apiVersion":"${v1}","kind":"ExecCredential","status":{"clientCertificateData":"x"}}`},
  ]
  for (const answer of answers) {
    it(`refuses an answer with ${answer.name} (never an unauthenticated request)`, async () => {
      const script = join(dir, `answer-${answers.indexOf(answer)}.sh`)
      writeFileSync(script, `#!/bin/sh\nprintf '%s' '${answer.output}'\n`)
      chmodSync(script, 0o755)
      const error = await rejection(runExecPlugin({apiVersion: v1, command: script, interactiveMode: 'Never'}, {cluster, where: 'w'}, {stderr: sink(), stdin: 'inherit', stdinIsTerminal: false}))
      expect(error).to.be.instanceOf(ConfigError)
      expect(error.message).to.match(answer.message)
    })
  }
})
