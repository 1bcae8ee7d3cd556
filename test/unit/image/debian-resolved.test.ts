import {createHash} from 'node:crypto'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {createServer, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {expect} from 'chai'

import type {DebianPackage} from '../../../scripts/image/debian-archive.js'
import {fetchDebianPackages} from '../../../scripts/image/debian-libs.js'
import {describeSubstitutions, lockDigest, readResolved, recordedPackages, replaceGone, type ResolvedFile, resolvedPath, substitutions, withRecord} from '../../../scripts/image/debian-resolved.js'
import {platforms} from '../../../scripts/image/platforms.js'

const pkg = (name: string, version: string, source: string, architecture = 'amd64', url = 'http://deb.debian.org/debian'): DebianPackage => ({
  architecture,
  filename: `pool/main/${source[0]}/${source}/${name}_${version}_${architecture}.deb`,
  name,
  sha256: createHash('sha256').update(`${name} ${version} ${architecture}`).digest('hex'),
  size: 1,
  suite: 'bookworm',
  url,
  version,
})

const locked = [pkg('libc6', '2.36-9+deb12u14', 'glibc'), pkg('libstdc++6', '12.2.0-14+deb12u1', 'gcc-12'), pkg('gcc-12-base', '12.2.0-14+deb12u1', 'gcc-12')]
const newest = [pkg('libc6', '2.36-9+deb12u15', 'glibc'), pkg('libstdc++6', '12.2.0-14+deb12u2', 'gcc-12'), pkg('gcc-12-base', '12.2.0-14+deb12u2', 'gcc-12')]

describe('the image: locked Debian packages gone from the archive’s pool (scripts/image/debian-resolved.ts)', function () {
  describe('replaceGone', function () {
    it('replaces a gone package by the newest and keeps packages of other sources at their locked versions', function () {
      const used = replaceGone(locked, newest, new Set(['libc6']))
      expect(used.map((p) => `${p.name} ${p.version}`)).to.deep.equal(['libc6 2.36-9+deb12u15', 'libstdc++6 12.2.0-14+deb12u1', 'gcc-12-base 12.2.0-14+deb12u1'])
      expect(used[1]).to.equal(locked[1])
    })

    it('replaces every package of a gone package’s source together, in the lock’s order', function () {
      const used = replaceGone(locked, [...newest].reverse(), new Set(['libstdc++6']))
      expect(used.map((p) => `${p.name} ${p.version}`)).to.deep.equal(['libc6 2.36-9+deb12u14', 'libstdc++6 12.2.0-14+deb12u2', 'gcc-12-base 12.2.0-14+deb12u2'])
    })

    it('throws, naming the package, when the indexes list no version of a gone package', function () {
      expect(() => replaceGone(locked, newest.slice(1), new Set(['libc6']))).to.throw(/libc6 2\.36-9\+deb12u14 \(amd64\) is gone/)
    })
  })

  describe('the record, keyed by the lock’s SHA-256 and the architecture', function () {
    const lockA = lockDigest('{"amd64": []}\n')
    const lockB = lockDigest('{"amd64": [] }\n')
    const record = {packages: replaceGone(locked, newest, new Set(['libc6'])), resolved: '2026-12-05T10:00:00Z'}

    it('a lock’s digest is the SHA-256 of its bytes: any change to the file is another key', function () {
      expect(lockA).to.match(/^[0-9a-f]{64}$/)
      expect(lockA).to.not.equal(lockB)
      expect(lockDigest(Buffer.from('{"amd64": []}\n'))).to.equal(lockA)
    })

    it('gives the record for the same lock and architecture only', function () {
      const file = withRecord({}, lockA, 'amd64', record)
      expect(recordedPackages(file, lockA, 'amd64', locked)).to.deep.equal(record)
      expect(recordedPackages(file, lockB, 'amd64', locked)).to.equal(undefined)
      expect(recordedPackages(file, lockA, 'arm64', locked)).to.equal(undefined)
    })

    it('ignores a record whose package names are not the lock’s', function () {
      const file = withRecord({}, lockA, 'amd64', record)
      expect(recordedPackages(file, lockA, 'amd64', [...locked, pkg('libatomic1', '12.2.0-14+deb12u1', 'gcc-12')])).to.equal(undefined)
    })

    it('adding a record keeps the other locks’ and architectures’ records and leaves the file it was given alone', function () {
      const before: ResolvedFile = withRecord(withRecord({}, lockB, 'amd64', record), lockA, 'arm64', record)
      const snapshot = JSON.stringify(before)
      const after = withRecord(before, lockA, 'amd64', record)
      expect(JSON.stringify(before)).to.equal(snapshot)
      expect(Object.keys(after).sort()).to.deep.equal([lockA, lockB].sort())
      expect(Object.keys(after[lockA]!).sort()).to.deep.equal(['amd64', 'arm64'])
    })
  })

  describe('the warning', function () {
    it('lists each change once with the architectures it applies to', function () {
      const amd64 = substitutions('amd64', locked, replaceGone(locked, newest, new Set(['libc6'])))
      const arm64Locked = locked.map((p) => pkg(p.name, p.version, p.filename.split('/')[3]!, 'arm64'))
      const arm64 = substitutions(
        'arm64',
        arm64Locked,
        replaceGone(
          arm64Locked,
          newest.map((p) => pkg(p.name, p.version, p.filename.split('/')[3]!, 'arm64')),
          new Set(['libc6', 'gcc-12-base']),
        ),
      )
      expect(amd64).to.deep.equal([{architecture: 'amd64', locked: '2.36-9+deb12u14', name: 'libc6', used: '2.36-9+deb12u15'}])
      expect(describeSubstitutions([...amd64, ...arm64])).to.equal(
        'libc6 2.36-9+deb12u14 → 2.36-9+deb12u15 (amd64, arm64), libstdc++6 12.2.0-14+deb12u1 → 12.2.0-14+deb12u2 (arm64), gcc-12-base 12.2.0-14+deb12u1 → 12.2.0-14+deb12u2 (arm64)',
      )
    })

    it('has nothing to say when the build uses the locked versions', function () {
      expect(substitutions('amd64', locked, locked)).to.deep.equal([])
    })
  })

  describe('fetchDebianPackages: --fetch-only records, the offline build after it uses exactly that', function () {
    let dir: string
    let server: Server | undefined
    const served = new Map<string, Buffer>()
    const requests: string[] = []

    beforeEach(async function () {
      dir = await mkdtemp(join(tmpdir(), 'nfdctl-debian-resolved-'))
      served.clear()
      requests.length = 0
      server = createServer((request, response) => {
        requests.push(request.url!)
        const body = served.get(request.url!)
        response.writeHead(body === undefined ? 404 : 200).end(body)
      })
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    })

    afterEach(async function () {
      if (server?.listening) await new Promise((resolve) => server!.close(resolve))
      await rm(dir, {force: true, recursive: true})
    })

    /** A package whose bytes the loopback archive serves (or not), with the SHA-256 of those bytes. */
    const archived = (name: string, version: string, source: string, serve: boolean): DebianPackage => {
      const base = pkg(name, version, source, 'amd64', `http://127.0.0.1:${(server!.address() as AddressInfo).port}/debian`)
      const bytes = Buffer.from(`${name} ${version}`)
      if (serve) served.set(`/debian/${base.filename}`, bytes)
      return {...base, sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length}
    }

    it('a gone locked version: resolved once, recorded under the lock’s digest, then served from the cache with the server gone', async function () {
      const lock = [archived('libc6', '2.36-9+deb12u14', 'glibc', false), archived('libstdc++6', '12.2.0-14+deb12u1', 'gcc-12', true)]
      const replacement = archived('libc6', '2.36-9+deb12u15', 'glibc', true)
      const selection = {locked: new Map([[platforms.amd64, lock]]), lockSha256: lockDigest('the lock')}
      let resolved = 0
      const lines: string[] = []
      const fetchOnly = await fetchDebianPackages(selection, {
        cacheDir: dir,
        log: (line) => lines.push(line),
        resolve: async (names, architecture) => {
          resolved++
          expect([names, architecture]).to.deep.equal([['libc6', 'libstdc++6'], 'amd64'])
          return [replacement, lock[1]!]
        },
      })
      expect(resolved).to.equal(1)
      expect(fetchOnly.get(platforms.amd64)!.map((p) => `${p.name} ${p.version}`)).to.deep.equal(['libc6 2.36-9+deb12u15', 'libstdc++6 12.2.0-14+deb12u1'])
      const warnings = lines.filter((line) => line.startsWith('warning:'))
      expect(warnings).to.have.length(1)
      expect(warnings[0]).to.include('libc6 2.36-9+deb12u14 → 2.36-9+deb12u15 (amd64)').and.include('recorded in').and.include('--refresh-debian')
      const file = await readResolved(dir)
      expect(Object.keys(file)).to.deep.equal([lockDigest('the lock')])
      expect(file[lockDigest('the lock')]!.amd64!.packages).to.deep.equal([replacement, lock[1]])
      expect(JSON.parse(await readFile(resolvedPath(dir), 'utf8'))).to.deep.equal(file)

      // The build inside the network namespace: nothing answers, and nothing may be resolved again.
      await new Promise((resolve) => server!.close(resolve))
      requests.length = 0
      lines.length = 0
      const offline = await fetchDebianPackages(selection, {
        cacheDir: dir,
        log: (line) => lines.push(line),
        resolve: () => Promise.reject(new Error('resolved again offline')),
      })
      expect(requests).to.deep.equal([])
      expect(offline.get(platforms.amd64)!.map(({path, ...p}) => p)).to.deep.equal([replacement, lock[1]])
      expect(offline.get(platforms.amd64)!.map((p) => p.path)).to.deep.equal(fetchOnly.get(platforms.amd64)!.map((p) => p.path))
      expect(lines.filter((line) => line.startsWith('warning:'))).to.deep.equal([lines.find((line) => line.startsWith('warning:'))])
      expect(lines.find((line) => line.startsWith('warning:')))
        .to.include('libc6 2.36-9+deb12u14 → 2.36-9+deb12u15 (amd64)')
        .and.include('as recorded in')
    })

    it('every locked version served: no record, no warning, the locked files', async function () {
      const lock = [archived('libc6', '2.36-9+deb12u14', 'glibc', true)]
      const lines: string[] = []
      const fetched = await fetchDebianPackages(
        {locked: new Map([[platforms.amd64, lock]]), lockSha256: lockDigest('the lock')},
        {cacheDir: dir, log: (line) => lines.push(line), resolve: () => Promise.reject(new Error('nothing is gone'))},
      )
      expect(fetched.get(platforms.amd64)!.map(({path, ...p}) => p)).to.deep.equal(lock)
      expect(lines.filter((line) => line.startsWith('warning:'))).to.deep.equal([])
      expect(await readResolved(dir)).to.deep.equal({})
    })

    it('another lock does not take this lock’s record', async function () {
      const lock = [archived('libc6', '2.36-9+deb12u14', 'glibc', false)]
      const replacement = archived('libc6', '2.36-9+deb12u15', 'glibc', true)
      await fetchDebianPackages({locked: new Map([[platforms.amd64, lock]]), lockSha256: lockDigest('lock A')}, {cacheDir: dir, log: () => {}, resolve: async () => [replacement]})
      await new Promise((resolve) => server!.close(resolve))
      const error = await fetchDebianPackages(
        {locked: new Map([[platforms.amd64, lock]]), lockSha256: lockDigest('lock B')},
        {cacheDir: dir, log: () => {}, resolve: () => Promise.reject(new Error('offline'))},
      ).then(
        () => undefined,
        (e: Error) => e,
      )
      expect(error?.message).to.match(/^debian: GET http:\/\/127\.0\.0\.1:\d+\/debian\/pool\/main\/g\/glibc\/libc6_2\.36-9\+deb12u14_amd64\.deb: fetch failed.*--fetch-only/)
    })
  })
})
