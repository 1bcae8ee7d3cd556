import {expect} from 'chai'
import {chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {createServer, type IncomingMessage, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {parse} from 'yaml'

import {ConfigError} from '../../../src/lib/errors.js'
import {Credentials} from '../../../src/lib/kube/credentials.js'
import {resolveKubeConfig} from '../../../src/lib/kube/kubeconfig-resolver.js'
import {idTokenExpiryMs, usableUntil} from '../../../src/lib/kube/oidc.js'
import {missingPrerequisite} from '../../support/prerequisites.js'
import {rejection} from '../../support/thrown.js'

/** An unsigned JWT expiring `inSeconds` from now (the client only reads exp; the API server verifies). */
function jwt(inSeconds: number, subject = 'alice'): string {
  const part = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url')
  return `${part({alg: 'RS256'})}.${part({exp: Math.floor(Date.now() / 1000) + inSeconds, sub: subject})}.c2ln`
}

interface Seen {
  method: string
  url: string
  authorization?: string
  body: string
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

describe('oidc id-token expiry', () => {
  it('reads exp from the JWT claims', () => {
    const token = jwt(3600)
    expect(idTokenExpiryMs(token, 'w')).to.be.closeTo(Date.now() + 3_600_000, 2000)
  })
  it('is usable until 10 s before exp, as client-go', () => {
    expect(usableUntil(jwt(3600), Date.now(), 'w')).to.be.a('number')
    expect(usableUntil(jwt(5), Date.now(), 'w')).to.equal(undefined)
    expect(usableUntil(undefined, Date.now(), 'w')).to.equal(undefined)
  })
  it('refuses a token that is not a JWT with one line saying to log in again', () => {
    expect(() => idTokenExpiryMs('opaque-token', 'user "u"')).to.throw(ConfigError, /not a valid JWT; log in again/)
  })
})

describe('auth-provider oidc against a token endpoint on 127.0.0.1', () => {
  let server: Server
  let issuer: string
  let dir: string
  const seen: Seen[] = []
  /** What the token endpoint answers next. */
  let tokenAnswer: {status: number; body: object | string; type?: string} = {body: {}, status: 200}
  /** When set, the token endpoint refuses Basic client authentication (clients in the form only). */
  let formOnly = false

  before(async () => {
    server = createServer(async (req, res) => {
      const text = await body(req)
      seen.push({authorization: req.headers.authorization, body: text, method: req.method!, url: req.url!})
      if (req.url === '/idp/.well-known/openid-configuration') {
        res.writeHead(200, {'Content-Type': 'application/json'}).end(JSON.stringify({issuer, token_endpoint: `${issuer}/token`}))
      } else if (req.url === '/idp/token' && req.method === 'POST') {
        if (formOnly && req.headers.authorization) return void res.writeHead(401, {'Content-Type': 'application/json'}).end('{"error":"invalid_client"}')
        const json = typeof tokenAnswer.body !== 'string'
        res.writeHead(tokenAnswer.status, {'Content-Type': tokenAnswer.type ?? (json ? 'application/json' : 'text/plain')}).end(json ? JSON.stringify(tokenAnswer.body) : tokenAnswer.body)
      } else {
        res.writeHead(404).end()
      }
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}/idp`
  })

  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'nfdctl-oidc-'))
    seen.length = 0
    formOnly = false
  })

  afterEach(() => rmSync(dir, {force: true, recursive: true}))

  /** A YAML kubeconfig with a comment, user "alice" on oidc and a second user that must stay as it is. */
  function kubeconfig(config: Record<string, string>, name = 'config'): string {
    const lines = Object.entries({'client-id': 'kubernetes', 'client-secret': 's3cr:t', 'idp-issuer-url': issuer, ...config}).map(([k, v]) => `        ${k}: "${v}"`)
    const path = join(dir, name)
    writeFileSync(
      path,
      [
        '# managed by hand: keep this comment',
        'apiVersion: v1',
        'clusters:',
        '- name: c',
        '  cluster: {server: "https://k8s.example:6443"}',
        'users:',
        '- name: bob',
        '  user: {token: bob-token}',
        '- name: alice',
        '  user:',
        '    auth-provider:',
        '      name: oidc',
        '      config:',
        ...lines,
        'contexts:',
        '- name: x',
        '  context: {cluster: c, user: alice}',
        'current-context: x',
        '',
      ].join('\n'),
      {mode: 0o600},
    )
    return path
  }

  async function load(path: string, env: NodeJS.ProcessEnv = {}): Promise<Credentials> {
    return Credentials.load(resolveKubeConfig({env: {}, home: dir, kubeconfig: path}), {env})
  }

  function authProviderConfig(path: string, user = 'alice'): Record<string, string> {
    const doc = parse(readFileSync(path, 'utf8')) as {users: Array<{name: string; user: {'auth-provider': {config: Record<string, string>}}}>}
    return doc.users.find((u) => u.name === user)!.user['auth-provider'].config
  }

  it('sends a valid id-token without asking the issuer', async () => {
    const token = jwt(3600)
    const credentials = await load(kubeconfig({'id-token': token, 'refresh-token': 'r1'}))
    expect((await credentials.headers()).Authorization).to.equal(`Bearer ${token}`)
    expect(seen).to.deep.equal([])
  })

  it('refreshes an expired id-token with the refresh-token at the discovered token endpoint and writes both back', async () => {
    const fresh = jwt(3600, 'alice-again')
    tokenAnswer = {body: {access_token: 'at', expires_in: 3600, id_token: fresh, refresh_token: 'r2', token_type: 'Bearer'}, status: 200}
    const path = kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'})

    const credentials = await load(path)
    expect((await credentials.headers()).Authorization).to.equal(`Bearer ${fresh}`)

    expect(seen.map((s) => `${s.method} ${s.url}`)).to.deep.equal(['GET /idp/.well-known/openid-configuration', 'POST /idp/token'])
    expect(Object.fromEntries(new URLSearchParams(seen[1].body))).to.deep.equal({grant_type: 'refresh_token', refresh_token: 'r1'})
    expect(Buffer.from(seen[1].authorization!.replace(/^Basic /, ''), 'base64').toString()).to.equal('kubernetes:s3cr%3At')
    const written = readFileSync(path, 'utf8')
    expect(authProviderConfig(path)).to.include({'id-token': fresh, 'refresh-token': 'r2'})
    expect(written).to.include('# managed by hand: keep this comment')
    expect(statSync(path).mode & 0o777).to.equal(0o600)
    expect(written).to.match(/- name: bob\n {2}user: \{ ?token: bob-token ?\}/)
    // Cached: a second request asks nobody.
    await credentials.headers()
    expect(seen).to.have.length(2)
  })

  it('keeps the refresh-token when the issuer returns none', async () => {
    const fresh = jwt(3600)
    tokenAnswer = {body: {access_token: 'at', id_token: fresh, token_type: 'Bearer'}, status: 200}
    const path = kubeconfig({'refresh-token': 'r1'}) // no id-token at all: refreshed too
    await (await load(path)).headers()
    expect(authProviderConfig(path)).to.include({'id-token': fresh, 'refresh-token': 'r1'})
  })

  it('sends the client credentials in the form when the endpoint refuses Basic (oauth2 auto-detection)', async () => {
    formOnly = true
    tokenAnswer = {body: {access_token: 'at', id_token: jwt(3600), token_type: 'Bearer'}, status: 200}
    await (await load(kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'}))).headers()
    const last = seen.at(-1)!
    expect(last.authorization).to.equal(undefined)
    expect(Object.fromEntries(new URLSearchParams(last.body))).to.deep.equal({client_id: 'kubernetes', client_secret: 's3cr:t', grant_type: 'refresh_token', refresh_token: 'r1'})
  })

  it('writes the tokens to the kubeconfig file that defined the user (KUBECONFIG with two files)', async () => {
    const fresh = jwt(3600)
    tokenAnswer = {body: {access_token: 'at', id_token: fresh, refresh_token: 'r2', token_type: 'Bearer'}, status: 200}
    const second = kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'}, 'second')
    const first = join(dir, 'first')
    writeFileSync(first, 'apiVersion: v1\nkind: Config\ncurrent-context: x\n')
    const before = readFileSync(first, 'utf8')
    const credentials = await Credentials.load(resolveKubeConfig({env: {KUBECONFIG: [first, second].join(delimiter)}, home: dir}), {env: {}})
    await credentials.headers()
    expect(readFileSync(first, 'utf8')).to.equal(before)
    expect(authProviderConfig(second)['id-token']).to.equal(fresh)
  })

  describe('writing back on the real filesystem', () => {
    beforeEach(() => {
      tokenAnswer = {body: {access_token: 'at', id_token: jwt(3600, 'alice-again'), refresh_token: 'r2', token_type: 'Bearer'}, status: 200}
    })

    it('keeps the owner and mode of a kubeconfig owned by another user, refreshed as root', async function () {
      if (process.geteuid?.() !== 0) missingPrerequisite(this, 'needs root to give the kubeconfig to uid 1000')
      const path = kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'})
      chownSync(path, 1000, 1001)

      await (await load(path)).headers()

      expect(authProviderConfig(path)).to.include({'refresh-token': 'r2'})
      const after = statSync(path)
      expect([after.uid, after.gid, after.mode & 0o7777]).to.deep.equal([1000, 1001, 0o600])
    })

    it("writes through a symlinked kubeconfig to its target, in the target's directory, and the link stays", async function () {
      const dotfiles = join(dir, 'dotfiles')
      mkdirSync(dotfiles)
      const target = kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'}, 'dotfiles/kubeconfig')
      const kube = join(dir, '.kube')
      mkdirSync(kube)
      const link = join(kube, 'config')
      // Relative and two hops: .kube/config -> current -> ../dotfiles/kubeconfig.
      symlinkSync('../dotfiles/kubeconfig', join(kube, 'current'))
      symlinkSync('current', link)

      await (await load(link)).headers()

      expect(lstatSync(link).isSymbolicLink()).to.equal(true)
      expect(readlinkSync(link)).to.equal('current')
      expect(lstatSync(join(kube, 'current')).isSymbolicLink()).to.equal(true)
      expect(authProviderConfig(target)).to.include({'refresh-token': 'r2'})
      expect(statSync(target).mode & 0o777).to.equal(0o600)
      expect(readdirSync(kube).sort()).to.deep.equal(['config', 'current'])
      expect(readdirSync(dotfiles)).to.deep.equal(['kubeconfig'])
    })
  })

  const failures: Array<{name: string; answer: typeof tokenAnswer; message: RegExp}> = [
    {answer: {body: {error: 'invalid_grant'}, status: 400}, message: /answered 400/, name: 'the refresh-token is refused'},
    {answer: {body: {access_token: 'at', token_type: 'Bearer'}, status: 200}, message: /no id_token/, name: 'the answer has no id_token'},
  ]
  for (const failure of failures) {
    it(`says in one line how to fix it when ${failure.name}`, async () => {
      tokenAnswer = failure.answer
      const path = kubeconfig({'id-token': jwt(-60), 'refresh-token': 'r1'})
      const before = readFileSync(path, 'utf8')
      const error = await rejection(load(path))
      expect(error).to.be.instanceOf(ConfigError)
      expect(error.message).to.match(failure.message)
      expect(error.message).to.include('user "alice": the oidc id-token has expired or is missing, and refreshing it failed')
      expect(error.message).to.include(`log in to ${issuer} again`)
      expect(error.message).to.not.include('\n')
      expect(readFileSync(path, 'utf8')).to.equal(before)
    })
  }

  it('says how to fix it when there is no refresh-token', async () => {
    const error = await rejection(load(kubeconfig({'id-token': jwt(-60)})))
    expect(error.message).to.include('there is no refresh-token')
    expect(error.message).to.include('log in to')
    expect(seen).to.deep.equal([])
  })

  it('says how to fix it when the issuer cannot be reached', async () => {
    const path = kubeconfig({'id-token': jwt(-60), 'idp-issuer-url': 'http://127.0.0.1:1/idp', 'refresh-token': 'r1'})
    const error = await rejection(load(path))
    expect(error).to.be.instanceOf(ConfigError)
    expect(error.message).to.match(/refreshing it failed: http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/)
  })
})
