import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'

import {kubernetesArchitecture, readBuildInfo, sourceCheckoutCommit, unrecordedCommit, versionInfo} from '../../../src/lib/version-info.js'
import {nfdctl} from '../../support/run-cli.js'

const packageVersion = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {version: string}).version

describe('version: what the build recorded and what runs it', function () {
  const base = {nodeVersion: 'v26.12.1', platform: 'linux', version: '1.2.3'}

  it('reports the packed commit, the Node version and the platform under Kubernetes architecture names', function () {
    const commit = '0123456789abcdef0123456789abcdef01234567'
    expect(versionInfo({...base, arch: 'x64', buildInfo: {commit}})).to.deep.equal({commit, node: 'v26.12.1', platform: 'linux/amd64', version: '1.2.3'})
    expect(versionInfo({...base, arch: 'arm64', buildInfo: {commit: `${commit}-dirty`}})).to.include({commit: `${commit}-dirty`, platform: 'linux/arm64'})
  })

  it('says why the commit is unknown: sources without build information, or a pack that recorded none', function () {
    expect(versionInfo({...base, arch: 'x64', buildInfo: undefined}).commit).to.equal(sourceCheckoutCommit)
    expect(versionInfo({...base, arch: 'x64', buildInfo: {commit: null}}).commit).to.equal(unrecordedCommit)
  })

  it('names architectures as GOARCH does; the ones Node names alike pass through', function () {
    expect(['x64', 'ia32', 'arm64', 'arm', 's390x', 'riscv64'].map(kubernetesArchitecture)).to.deep.equal(['amd64', '386', 'arm64', 'arm', 's390x', 'riscv64'])
  })

  describe('readBuildInfo', function () {
    let dir: string
    beforeEach(async function () {
      dir = await mkdtemp(join(tmpdir(), 'nfdctl-build-info-'))
    })
    afterEach(async function () {
      await rm(dir, {force: true, recursive: true})
    })

    it('reads the commit the pack step wrote, or null', async function () {
      await writeFile(join(dir, 'a.json'), JSON.stringify({commit: 'abc123'}))
      await writeFile(join(dir, 'b.json'), JSON.stringify({commit: null}))
      expect(await readBuildInfo(pathToFileURL(join(dir, 'a.json')))).to.deep.equal({commit: 'abc123'})
      expect(await readBuildInfo(pathToFileURL(join(dir, 'b.json')))).to.deep.equal({commit: null})
    })

    it('is undefined when there is no file, and throws on a file it cannot trust', async function () {
      expect(await readBuildInfo(pathToFileURL(join(dir, 'absent.json')))).to.equal(undefined)
      await writeFile(join(dir, 'bad.json'), JSON.stringify({commit: 42}))
      let thrown: unknown
      await readBuildInfo(pathToFileURL(join(dir, 'bad.json'))).catch((error: unknown) => (thrown = error))
      expect((thrown as Error | undefined)?.message).to.match(/bad\.json: "commit" must be a string or null/)
    })
  })

  describe('nfdctl version, run from the sources', function () {
    const platform = `linux/${({arm64: 'arm64', x64: 'amd64'} as Record<string, string>)[process.arch] ?? process.arch}`

    it('prints version, commit, Node and platform as text', async function () {
      const run = await nfdctl(['version'])
      expect(run.exitCode).to.equal(0)
      expect(run.stdout.trimEnd().split('\n')).to.deep.equal([`version:  ${packageVersion}`, `commit:   ${sourceCheckoutCommit}`, `node:     ${process.version}`, `platform: ${platform}`])
    })

    it('-o json and --json give the same object', async function () {
      const expected = {commit: sourceCheckoutCommit, node: process.version, platform, version: packageVersion}
      for (const args of [['-o', 'json'], ['--json']]) {
        const run = await nfdctl(['version', ...args])
        expect(run.exitCode, args.join(' ')).to.equal(0)
        expect(JSON.parse(run.stdout), args.join(' ')).to.deep.equal(expected)
      }
    })

    it('an unknown output format is exit 2 with one line', async function () {
      const run = await nfdctl(['version', '-o', 'xml'])
      expect(run.exitCode).to.equal(2)
      expect(run.error?.message).to.match(/^Expected --output=xml to be one of: text, json, yaml/)
      expect(run.error?.message).to.not.include('\n')
    })
  })
})
