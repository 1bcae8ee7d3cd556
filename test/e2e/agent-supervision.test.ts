import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

import {draAgentArgs, nodeAgentArgs} from '../../harness/devices/dra-agent.js'
import type {NodeEnv} from '../../harness/node/pods.js'
import {CliProcess} from '../../harness/process/cli-process.js'
import {freePort} from '../../harness/process/free-port.js'
import {waitFor} from '../../harness/process/wait.js'
import {testNode} from '../support/test-node.js'

const devBin = fileURLToPath(new URL('../../bin/dev.js', import.meta.url))

/** The error lines of a command's stderr: oclif's one line (the development entry adds a stack trace below it). */
const errorLines = (stderr: readonly string[]): string[] =>
  stderr
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('at '))
    .map((l) => l.replace(/^› +/, ''))

interface LogLine {
  msg: string
  holder?: number
  err?: string
}

describe('devices agent on a real node: one agent per node, and a start-up check of what it needs', function () {
  let env: NodeEnv
  let dir: string
  const agents: CliProcess[] = []

  const agentArgs = (stateDir: string, extra?: string[]): string[] => nodeAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir}, extra)
  const startAgent = (stateDir: string, extra?: string[]): CliProcess => {
    const cli = new CliProcess(agentArgs(stateDir, extra))
    agents.push(cli)
    return cli
  }
  /** The agent run through a wrapper (unshare …): its exit code and stderr. */
  const runWrapped = async (wrapper: string[], stateDir: string): Promise<{code: number; stderr: string}> => {
    const [command, ...args] = wrapper
    return promisify(execFile)(command, [...args, process.execPath, devBin, ...agentArgs(stateDir)], {timeout: 60_000}).then(
      () => ({code: 0, stderr: ''}),
      (error: {code: number; stderr: string}) => ({code: error.code, stderr: error.stderr}),
    )
  }

  before(async function () {
    env = await testNode(this)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-supervision-'))
  })
  afterEach(async function () {
    this.timeout(60_000)
    for (const agent of agents.splice(0)) await agent.stop('SIGTERM')
  })
  after(async () => {
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it("a second agent on the same --state-dir exits 1 naming the holder's PID; with --wait-for-lock it waits (ready, as a maxSurge update needs) and starts once the first is SIGKILLed", async function () {
    this.timeout(120_000)
    const stateDir = join(dir, 'state-lock')
    const first = startAgent(stateDir)
    await first.waitForLine<LogLine>('the first agent started', (l) => l.msg === 'devices agent starting', 30_000)
    expect(await readFile(join(stateDir, 'agent.lock'), 'utf8')).to.equal(`${first.pid}\n`)

    const second = startAgent(stateDir)
    expect((await second.ended).code).to.equal(1)
    expect(errorLines(second.stderr)).to.deep.equal([
      `Error: another devices agent (PID ${first.pid}) holds ${join(stateDir, 'agent.lock')}: one agent per node; stop it, or start this one with --wait-for-lock to take over when it exits`,
    ])
    expect(second.json<LogLine>().map((l) => l.msg)).to.not.include('devices agent starting')

    const metricsPort = await freePort()
    const waiting = startAgent(stateDir, ['--wait-for-lock', '--metrics-port', String(metricsPort)])
    const told = await waiting.waitForLine<LogLine>('told it waits', (l) => l.msg.startsWith('another agent holds the state directory'), 30_000)
    expect(told.value.holder).to.equal(first.pid)
    const standby = await fetch(`http://127.0.0.1:${metricsPort}/readyz`)
    expect(standby.status).to.equal(200)
    expect(await standby.text()).to.equal(`standby: waiting for the lock on ${stateDir}\n`)
    expect(waiting.json<LogLine>().map((l) => l.msg)).to.not.include('devices agent starting')

    const killedAt = performance.now()
    expect(await first.stop('SIGKILL')).to.equal(null)
    const started = await waiting.waitForLine<LogLine>('the waiting agent started', (l) => l.msg === 'devices agent starting', 30_000)
    expect(started.at - killedAt, 'ms from the kill to the start').to.be.below(3000)
    expect(await readFile(join(stateDir, 'agent.lock'), 'utf8')).to.equal(`${waiting.pid}\n`)
    await waitFor('/readyz no longer in standby', async () => !(await (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).text()).startsWith('standby'), {timeoutMs: 10_000})
  })

  it("outside the host's PID namespace (hostPID missing) it exits 1 with one line naming hostPID", async function () {
    this.timeout(90_000)
    const {code, stderr} = await runWrapped(['unshare', '--pid', '--fork', '--mount-proc'], join(dir, 'state-pidns'))
    expect(code).to.equal(1)
    expect(errorLines(stderr.split('\n'))).to.deep.equal([
      "Error: the agent cannot work here: containerd runs in another PID namespace, so the PIDs it reports name no process here: run the agent in the host's PID namespace (hostPID: true in the pod spec)",
    ])
  })

  it("with a /dev of its own (the host's not mounted) it exits 1 with one line naming the /dev mount", async function () {
    this.timeout(90_000)
    // A container's /dev: a tmpfs with the few nodes a runtime makes.
    const nodes = ['null c 1 3', 'zero c 1 5', 'full c 1 7', 'random c 1 8', 'urandom c 1 9', 'tty c 5 0'].map((n) => `mknod -m 666 /dev/${n}`)
    const containerDev = ['mount -t tmpfs none /dev', ...nodes, 'exec "$@"'].join(' && ')
    const {code, stderr} = await runWrapped(['unshare', '--mount', '--propagation', 'private', 'sh', '-c', containerDev, 'sh'], join(dir, 'state-dev'))
    expect(code).to.equal(1)
    const lines = errorLines(stderr.split('\n'))
    expect(lines).to.have.length(1)
    expect(lines[0]).to.match(/^Error: the agent cannot work here: \/dev has 6 of the kernel's \d+ character devices, so it is not the host's \/dev: mount it \(a hostPath volume \/dev at \/dev\)$/)
  })

  it('a source that cannot come back (the DRA plugin directory replaced by a file) is retried with back-off while /readyz names it, then the agent exits 1 with one line naming it', async function () {
    this.timeout(300_000)
    const udevDir = join(dir, 'udev')
    await mkdir(udevDir, {recursive: true})
    const pluginDir = join(env.node.kubelet.rootDir, 'plugins', 'devices.nfdctl.io')
    const metricsPort = await freePort()
    const args = draAgentArgs(env.node, {kubeconfig: env.plane.kubeconfig, stateDir: join(dir, 'state-dra'), udevDir})
    const agent = new CliProcess([...args.slice(0, args.indexOf('--metrics-port')), ...args.slice(args.indexOf('--metrics-port') + 2), '--metrics-port', String(metricsPort)])
    agents.push(agent)
    const readyz = async (): Promise<{status: number; text: string}> => {
      const response = await fetch(`http://127.0.0.1:${metricsPort}/readyz`)
      return {status: response.status, text: await response.text()}
    }
    try {
      await agent.waitForLine<LogLine>('the DRA driver registered', (l) => l.msg === 'DRA driver devices.nfdctl.io: registered with kubelet', 60_000)
      await rm(pluginDir, {force: true, recursive: true})
      await writeFile(pluginDir, 'not a directory')
      const down = await waitFor(
        '/readyz naming the DRA plugin sockets',
        async () => {
          const r = await readyz().catch(() => undefined)
          return r?.text.includes('DRA plugin sockets: down') ? r : undefined
        },
        {timeoutMs: 30_000},
      )
      expect(down.status).to.equal(503)
      expect(down.text).to.match(/DRA plugin sockets: down for \d+ s \(\d+ failures? in \d+ s\): cannot serve the DRA plugin: /)
      const startedAt = performance.now()
      const end = await agent.ended
      expect(end.code, agent.transcript()).to.equal(1)
      // Given up after the run of failures lasted 2 minutes: no sooner.
      expect(performance.now() - startedAt, 'ms from the first failure to the exit').to.be.above(100_000)
      const errors = agent.json<LogLine & {level: string}>().filter((l) => l.level === 'error')
      expect(errors.map((l) => l.msg)).to.deep.equal(['a source cannot come back; exiting 1, granted access stays'])
      expect(errors[0].err).to.match(/^DRA plugin sockets cannot come back: \d+ failures in 1\d\d s, the last: cannot serve the DRA plugin: E(EXIST|NOTDIR)/)
    } finally {
      await rm(pluginDir, {force: true, recursive: true})
    }
  })
})
