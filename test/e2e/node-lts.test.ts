import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtemp, readFile, rename, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {createInterface} from 'node:readline'

import {runToEnd} from '../../harness/process/run-to-end.js'
import {daemonNodeFlags} from '../../src/cli/daemon-node-flags.js'
import {exportCommit, installCli, packCli} from '../../scripts/image/app-layer.js'
import {imageCacheDir} from '../../scripts/image/cache.js'
import {imageNodeVersion, installImageNodeHere} from '../../scripts/image/node-runtime.js'
import {platforms} from '../../scripts/image/platforms.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const repo = new URL('../..', import.meta.url).pathname
const log = (line: string): void => {
  process.stderr.write(`      ${line}\n`)
}

// The image runs the CLI on the Node LTS pinned in scripts/image/node-runtime.ts; laptops run it on Node
// ≥ 20.19 (this process). The same official binary the image holds runs the unit suite and the packed CLI.
describe(`the image's Node (${imageNodeVersion}): the unit suite and the packed CLI under it`, function () {
  let dir: string
  /** PATH with the image's node first, so `#!/usr/bin/env node` lines and mocha's child processes find it. */
  let path: string
  let node: string

  before(async function () {
    this.timeout(5 * 60_000)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-node-lts-'))
    const installed = await installImageNodeHere(join(dir, 'bin'), {cacheDir: imageCacheDir(), log})
    if (installed === undefined) missingPrerequisite(this, `the image has no Node runtime for this machine's architecture (${process.arch})`)
    node = installed
    path = `${join(dir, 'bin')}:${process.env.PATH ?? ''}`
  })

  after(async function () {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('runs the unit suite (npm run test:unit: mocha through tsx) with 0 failed', async function () {
    this.timeout(10 * 60_000)
    // Loaded by the mocha process that runs the tests (mocha re-executes node for --node-option): it says
    // which Node ran them, so the test cannot pass on the wrong one.
    const probe = join(dir, 'which-node.cjs')
    await writeFile(probe, "process.stdout.write('unit suite under node ' + process.version + ' at ' + process.execPath + '\\n')\n")
    const result = await runToEnd(node, [join(repo, 'node_modules', 'mocha', 'bin', 'mocha.js'), '--require', probe], {
      cwd: repo,
      env: {...process.env, NFDCTL_TEST_PART: 'unit', PATH: path},
    })
    const lines = result.stdout.trimEnd().split('\n')
    expect(lines, result.stderr.slice(-2000)).to.include(`unit suite under node v${imageNodeVersion} at ${node}`)
    const summary = /^(\d+) passed, (\d+) failed, (\d+) skipped$/.exec(lines.at(-1) ?? '')
    expect(summary, `last line: ${lines.at(-1)}\n${lines.slice(-40).join('\n')}`).to.not.equal(null)
    expect(Number(summary![2]), lines.slice(-60).join('\n')).to.equal(0)
    expect(Number(summary![1])).to.be.greaterThan(1000)
    expect(result.code).to.equal(0)
  })

  it('runs the packed CLI (npm pack, production dependencies from the lockfile): version and --help', async function () {
    this.timeout(10 * 60_000)
    const source = await exportCommit(repo, 'HEAD', join(dir, 'src'))
    const tarball = await packCli(source, repo, dir, log)
    const app = await installCli(tarball, source, Object.values(platforms).find((p) => p.node === process.arch)!, join(dir, 'installed'), log)
    // bin/run.js directly: its `#!/usr/bin/env -S node <flags>` line finds the image's node first on PATH.
    const env = {...process.env, PATH: path}
    const version = await runToEnd(join(app, 'bin', 'run.js'), ['version', '-o', 'json'], {env})
    expect(version.code, version.stderr).to.equal(0)
    const arch = ({arm64: 'arm64', x64: 'amd64'} as Record<string, string>)[process.arch]
    expect(JSON.parse(version.stdout)).to.deep.equal({commit: source.commit, node: `v${imageNodeVersion}`, platform: `linux/${arch}`, version: source.version})
    const help = await runToEnd(join(app, 'bin', 'run.js'), ['--help'], {env})
    expect(help.code, help.stderr).to.equal(0)
    expect(help.stdout).to.include(`nfdctl/${source.version} linux-${process.arch} node-v${imageNodeVersion}`)
    for (const command of ['autocomplete', 'devices', 'gc', 'plugins', 'version']) expect(help.stdout).to.match(new RegExp(`^  ${command} `, 'm'))
    // The root help and a plain `version` are answered without oclif where the package has
    // dist/cli/before-oclif.js; without it oclif answers: the same text, for each way of asking and at a
    // terminal's width.
    const beforeOclif = join(app, 'dist', 'cli', 'before-oclif.js')
    for (const [args, columns] of [
      [['--help'], '80'],
      [[], '52'],
      [['help'], '133'],
      [['version'], '80'],
    ] as const) {
      const fast = await runToEnd(join(app, 'bin', 'run.js'), [...args], {env: {...env, OCLIF_COLUMNS: columns}})
      await rename(beforeOclif, `${beforeOclif}.aside`)
      const oclif = await runToEnd(join(app, 'bin', 'run.js'), [...args], {env: {...env, OCLIF_COLUMNS: columns}}).finally(() => rename(`${beforeOclif}.aside`, beforeOclif))
      expect(oclif.code, oclif.stderr).to.equal(0)
      expect(fast.code, fast.stderr).to.equal(0)
      expect(fast.stdout, `nfdctl ${args.join(' ')} at ${columns} columns`).to.equal(oclif.stdout)
    }
    // A daemon starts again in the same process (execve) with the V8 flags that act only from Node's command
    // line (src/cli/daemon-node-flags.ts); a one-shot command keeps the `#!` line's. The API server is a port
    // on loopback where nothing listens: gc run keeps trying, long enough to be looked at.
    const kubeconfig = join(dir, 'kubeconfig-nothing-listens.yaml')
    await writeFile(kubeconfig, kubeconfigFor('https://127.0.0.1:9'))
    const daemon = spawn(join(app, 'bin', 'run.js'), ['gc', 'run', '--metrics-port', '0', '--kubeconfig', kubeconfig], {env, stdio: ['ignore', 'pipe', 'pipe']})
    try {
      const [line] = (await once(createInterface({input: daemon.stdout!}), 'line')) as [string]
      expect(JSON.parse(line)).to.include({msg: 'gc run starting'})
      const commandLine = (await readFile(`/proc/${daemon.pid}/cmdline`, 'utf8')).split('\0').slice(0, -1)
      expect(commandLine.slice(1, commandLine.indexOf(join(app, 'bin', 'run.js')))).to.deep.equal(['--max-semi-space-size=4', ...daemonNodeFlags.get('gc run')!])
      expect(commandLine.slice(commandLine.indexOf(join(app, 'bin', 'run.js')) + 1)).to.deep.equal(['gc', 'run', '--metrics-port', '0', '--kubeconfig', kubeconfig])
    } finally {
      daemon.kill('SIGKILL')
    }
    // No command's bundle loads what only a namespace of a Node built-in would (scripts/bundle.mjs): undici
    // (node:http's fetch and WebSocket) or Web Crypto (node:crypto's webcrypto).
    for (const command of ['gc/once', 'gc/run', 'devices/agent', 'devices/list', 'plugins/serve']) {
      const probe = `await import(${JSON.stringify(join(app, 'dist', 'commands', `${command}.js`))}); process.stdout.write(JSON.stringify(process.moduleLoadList))`
      const loaded = await runToEnd(node, ['--input-type=module', '-e', probe], {env})
      expect(loaded.code, loaded.stderr).to.equal(0)
      const modules = JSON.parse(loaded.stdout) as string[]
      expect(modules, `${command} talks to the API server`).to.include('NativeModule https')
      expect(
        modules.filter((m) => /undici|webcrypto/.test(m)),
        command,
      ).to.deep.equal([])
    }
    const refused = await runToEnd(join(app, 'bin', 'run.js'), ['gc', 'run', '--kubeconfig', kubeconfig], {env: {...env, NFDCTL_DAEMON_NODE_FLAGS: '--lite-mode gc.js'}})
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.equal(`Error: NFDCTL_DAEMON_NODE_FLAGS holds "gc.js", which is not a Node or V8 flag: give flags such as --lite-mode, separated by spaces, or '' for none\n`)
  })
})

/** A kubeconfig with a bearer token for one server. */
function kubeconfigFor(server: string): string {
  return `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
}
