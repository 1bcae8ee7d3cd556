import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {ContainerdClient} from '../../src/lib/runtime/containerd-client.js'
import {agentProgramName, devicePrograms} from '../../src/lib/runtime/device-bpf.js'
import {allowDevice, denyDevice, deviceControlOf} from '../../src/lib/runtime/device-cgroup.js'
import {checkDeviceInvariant, type InvariantReport} from '../../harness/devices/device-invariant.js'
import {attachRuntimeProgram, detachDevicePrograms, ruleOf} from '../../harness/devices/device-programs.js'
import {describeFindings, FaultStorm} from '../../harness/devices/fault-storm.js'
import {canUseLoopControl} from '../../harness/devices/loop-devices.js'
import {firstLoop} from '../../harness/devices/loop-owners.js'
import {waitForPod, type NodeEnv} from '../../harness/node/pods.js'
import {SeededRandom, seedFrom} from '../../harness/seeded-random.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {testNode} from '../support/test-node.js'

const loopBase = firstLoop('test/e2e/agent-faults.test.ts')
const kills = Number(process.env.NFDCTL_FAULT_KILLS ?? 10)

const log = (line: string): void => void process.stderr.write(`      ${line}\n`)

describe('devices agent --dra under faults on a real node: SIGKILLs amid plugs, unplugs, re-plugs and pod starts', function () {
  let env: NodeEnv
  let dir: string
  let storm: FaultStorm | undefined
  const seed = seedFrom('NFDCTL_FAULT_SEED')

  before(async function () {
    env = await testNode(this)
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    this.timeout(5 * 60_000)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-faults-'))
    log(`fault storm seed ${seed} (NFDCTL_FAULT_SEED=${seed} runs the same storm again)`)
    storm = new FaultStorm({dir, env, kills, log, loopBase, maxPods: 12, prefix: 'nfdctl-faults', random: new SeededRandom(seed), settleTimeoutMs: 15_000})
    await storm.setUp()
  })

  after(async function () {
    this.timeout(120_000)
    if (process.env.NFDCTL_DEBUG_AGENT && storm) console.log(storm.transcript())
    await storm?.tearDown()
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  const check = (): Promise<InvariantReport> => checkDeviceInvariant({client: env.client, node: env.node, present: storm!.present(), watched: storm!.watched()})

  it("the invariant checker can fail: a rule planted by hand is stray, one taken away is missing, the runtime's /dev/null taken away is missing, a program that allows all is stray", async function () {
    const ns = storm!.namespace
    const annotated = await waitForPod(env, `${ns}/annotation-2`)
    const containerd = new ContainerdClient({address: env.node.containerd.socket, namespace: 'k8s.io'})
    const pid = await containerd
      .getTask(annotated.containerId)
      .then((t) => t!.pid)
      .finally(() => containerd.close())
    const control = await deviceControlOf(pid, {mode: 'v2'}).catch(() => deviceControlOf(pid, {mode: 'v1'}))
    const v1Dir = control.mode === 'v1' ? control.dir : control.v1Dir
    // On a hybrid host the storm gave this container what runc attaches on cgroup v2; the agent keeps it in v2 mode.
    if (control.mode === 'v2') expect(devicePrograms(control.dir).map((p) => p.name)).to.deep.equal([agentProgramName])
    const before = await check()
    expect([...before.stray, ...before.missing], 'settled before planting').to.deep.equal([])

    // Never plugged in, so unknown to the agent, which leaves what is planted for it alone.
    const unused = storm!.loopNumbers.find((n) => !existsSync(`/dev/loop${n}`))!
    const main = `${ns}/annotation-2/main`
    if (v1Dir !== undefined) {
      const planted = {access: 'rw', major: 7, minor: unused, type: 'b' as const}
      await allowDevice(v1Dir, planted)
      try {
        const found = await check()
        expect(found.stray.map((f) => [f.container, f.device])).to.deep.equal([[main, `b 7:${unused}`]])
        expect(found.stray[0].text).to.match(/v1 devices\.list: .*\bb 7:\d+ rw/)
      } finally {
        await denyDevice(v1Dir, planted)
      }

      // Taken away: one of the class's disks the pod holds by annotation.
      const held = storm!.present().find((d) => d.classes.includes(storm!.classClass))!
      const rule = {access: 'rw', major: 7, minor: held.minor, type: 'b' as const}
      await denyDevice(v1Dir, rule)
      try {
        const found = await check()
        expect(found.missing.map((f) => [f.container, f.device])).to.deep.equal([[main, `b 7:${held.minor}`]])
        expect(found.missing[0].text).to.match(/rw not allowed/)
      } finally {
        await allowDevice(v1Dir, rule)
      }
    }

    // The runtime's own: /dev/null (in its OCI spec as a rule, made by runc) taken away, its rule and then its node.
    if (v1Dir !== undefined) {
      const devNull = {access: 'rwm', major: 1, minor: 3, type: 'c' as const}
      await denyDevice(v1Dir, devNull)
      try {
        const found = await check()
        expect(found.missing.map((f) => [f.container, f.device])).to.deep.equal([[main, 'c 1:3']])
        expect(found.missing[0].text).to.match(/is its runtime's .*rw not allowed/)
      } finally {
        await allowDevice(v1Dir, devNull)
      }
    }
    // Its node removed from the host's side (runc's exec needs /dev/null, so the container cannot put it back itself).
    const devNullPath = `/proc/${pid}/root/dev/null`
    await rm(devNullPath)
    try {
      const found = await check()
      expect(found.missing.map((f) => [f.container, f.device, f.text.includes('no /dev/null in its /dev')])).to.deep.equal([[main, 'c 1:3', true]])
    } finally {
      execFileSync('mknod', ['-m', '666', devNullPath, 'c', '1', '3'])
    }

    // A node made inside the container (containers may mknod) for a number it may not open: stale, not stray.
    await env.node.exec(annotated.containerId, ['mknod', `/dev/loop${unused}`, 'b', '7', String(unused)])
    try {
      const found = await check()
      expect(found.staleNodes.map((f) => [f.container, f.device])).to.deep.equal([[main, `b 7:${unused}`]])
      expect(found.stray).to.deep.equal([])
    } finally {
      await env.node.exec(annotated.containerId, ['rm', `/dev/loop${unused}`])
    }

    // cgroup v2: a program that allows every device, beside the v1 rules, is read and run.
    if (control.mode === 'v2') {
      attachRuntimeProgram(control.dir, [ruleOf('allow a')], 'allow_all')
      try {
        const found = await check()
        const strays = found.stray.filter((f) => f.container === main)
        expect(strays.length, 'every watched number not its own').to.equal(storm!.loopNumbers.length - storm!.present().filter((d) => d.classes.includes(storm!.classClass)).length)
        expect(strays[0].text).to.match(/v2 device program allow_all id \d+ allows rw/)
      } finally {
        detachDevicePrograms(control.dir, 'allow_all')
      }
    }
    const after = await check()
    expect([...after.stray, ...after.missing], 'all put back').to.deep.equal([])
  })

  it('the downtime window of each path: a disk unplugged while the agent was SIGKILLed, a disk in no class at its number; the agent takes the number from its old holder at start, before the API server or kubelet', async function () {
    this.timeout(5 * 60_000)
    const result = await storm!.measureWindows(1)
    log(`downtime windows from the agent's spawn (ms): ${JSON.stringify(result.windows)}; taken by the start sweep: ${JSON.stringify(result.swept)}`)
    expect([...result.stray, ...result.missing], describeFindings([...result.stray, ...result.missing])).to.deep.equal([])
    for (const [path, ms] of Object.entries(result.windows)) {
      expect(ms, path).to.have.length(1)
      // The sources run through tsx here (its start-up is in the window); bench:faults times the installed CLI.
      expect(ms[0], `${path} window`).to.be.below(6000)
    }
    expect(result.swept).to.deep.equal({annotation: 1, claim: 1, device: 1, limit: 1})
  })

  it(`${kills} SIGKILLs at random moments: after every restart and at the end, every container holds exactly the devices its classes and claims give it`, async function () {
    this.timeout(10 * 60_000)
    const result = await storm!.run()
    const worked = [...result.settleMsWithWork].sort((a, b) => a - b)
    const at = (p: number): string => (worked.length === 0 ? '-' : `${Math.round(worked[Math.min(worked.length - 1, Math.ceil((p / 100) * worked.length) - 1)])} ms`)
    log(`seed ${result.seed}: ${result.kills} kills, ${result.killsSurvived} survived; ${worked.length} of ${result.settleMs.length} restarts had work, settled in p50 ${at(50)}, p95 ${at(95)}`)
    log(`actions ${JSON.stringify(result.actions)}`)
    log(`stray ${result.stray.length}, missing ${result.missing.length}, stale device nodes ${result.staleNodes.length}; pods not running: ${result.podsNotRunning.join(', ') || 'none'}`)
    if (result.staleNodes.length > 0) log(`stale device nodes:\n${describeFindings(result.staleNodes)}`)
    const repeat = `(NFDCTL_FAULT_SEED=${result.seed} repeats the storm)`
    expect(result.stray, `stray grants ${repeat}:\n${describeFindings(result.stray)}`).to.deep.equal([])
    expect(result.missing, `missing grants after settling ${repeat}:\n${describeFindings(result.missing)}`).to.deep.equal([])
    expect(result.killsSurvived).to.equal(result.kills)
  })
})
