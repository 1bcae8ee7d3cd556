import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, mkdtemp, readdir, readFile, rm, rmdir, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'

import {agentProgramName, devicePrograms, ProgramChangedError, replaceDeviceProgram} from '../../src/lib/runtime/device-bpf.js'
import {compileDeviceProgram, deviceAccess, deviceType, emulateRules, encodeInstructions, rulesWithout, type DeviceProgramRule} from '../../src/lib/runtime/device-program.js'
import {attachDeviceProgram, BpfError, closeFd, loadDeviceProgram, openCgroup, programFdById} from '../../src/lib/sys/bpf.js'
import {runDeviceProgram} from '../../harness/devices/bpf-interpreter.js'
import {attachProgram, attachRuntimeProgram, detachDevicePrograms, ruleOf, runcDeviceRules} from '../../harness/devices/device-programs.js'
import {addLoopDevice, canUseLoopControl, removeLoopDevice} from '../../harness/devices/loop-devices.js'
import {missingPrerequisite} from '../support/prerequisites.js'

const run = promisify(execFile)
// Loop devices 420-424 belong to these tests.
const loop = 420

const rule = ruleOf
// What runc 1.1 gives a containerd 1.6 CRI container (its spec says only deny all): the runtime's base.
const criSpec = {linux: {resources: {devices: [{access: 'rwm', allow: false}]}}}
const runtimeBase = runcDeviceRules(criSpec)

describe('cgroup v2 device programs on the real kernel (bpf(2) through koffi)', function () {
  let root: string
  let cgroup: string
  let dir: string

  /** Runs `script` in a new shell inside the test cgroup; true when it exits 0. */
  const inCgroup = async (script: string): Promise<boolean> => {
    try {
      await run('sh', ['-c', `echo $$ > ${cgroup}/cgroup.procs && ${script}`])
      return true
    } catch {
      return false
    }
  }
  /** Opens the device for reading or writing (r, w) or makes a node of it (m) from inside the cgroup: whether the kernel let it. */
  const can = async (device: string, access: 'r' | 'w' | 'm', numbers?: string): Promise<boolean> => {
    // Only the open is tried (what the device cgroup decides): /dev/full, for one, opens for writing but fails every write.
    if (access === 'r') return inCgroup(`: < ${device}`)
    if (access === 'w') return inCgroup(`: > ${device}`)
    await rm(join(dir, 'node'), {force: true})
    const [type, major, minor] = numbers!.split(' ')
    return inCgroup(`mknod ${join(dir, 'node')} ${type} ${major} ${minor} 2>/dev/null`)
  }
  const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
  /** Replaces the cgroup's one program, the one read just before. */
  const replace = (rules: readonly DeviceProgramRule[]): void => {
    const attached = devicePrograms(cgroup)
    expect(attached, 'one program attached').to.have.length(1)
    replaceDeviceProgram(cgroup, attached[0].id, rules)
  }

  before(async function () {
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'cgroup v2 device programs need root')
    if (!canUseLoopControl()) missingPrerequisite(this, '/dev/loop-control is not usable (needs root and the loop driver)')
    const mounts = await readFile('/proc/self/mounts', 'utf8')
    const unified = mounts
      .split('\n')
      .map((l) => l.split(' '))
      .find((f) => f[2] === 'cgroup2')?.[1]
    if (unified === undefined) missingPrerequisite(this, 'no cgroup2 hierarchy is mounted')
    root = unified!
    cgroup = join(root, `nfdctl-bpf-test-${process.pid}`)
    await mkdir(cgroup)
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-bpf-'))
    await writeFile(join(dir, 'data'), 'x')
    addLoopDevice(loop)
    await run('losetup', [`/dev/loop${loop}`, join(dir, 'data')]).catch(() => {})
  })

  // Each test starts from the runtime's program alone, as a container does.
  beforeEach(function () {
    detachDevicePrograms(cgroup)
    attachRuntimeProgram(cgroup, runtimeBase)
  })

  after(async function () {
    if (cgroup) {
      detachDevicePrograms(cgroup)
      await rmdir(cgroup).catch(() => {})
    }
    await run('losetup', ['-d', `/dev/loop${loop}`]).catch(() => {})
    removeLoopDevice(loop)
    if (dir) await rm(dir, {force: true, recursive: true})
  })

  it('denies and then allows /dev/zero and a loop device, seen by a process in the cgroup; replacing keeps the other rules', async function () {
    expect(await can('/dev/zero', 'r')).to.equal(true) // the runtime's program allows it
    const before = await fds() // after a first child process, whose set-up keeps descriptors of its own
    replace(runtimeBase.filter((r) => !(r.type === 'c' && r.major === 1 && r.minor === 5)))
    expect(await can('/dev/zero', 'r'), '/dev/zero without its rule').to.equal(false)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device before it is granted').to.equal(false)
    expect(await can('/dev/null', 'w'), '/dev/null (still in the base)').to.equal(true)

    replace([...runtimeBase, rule(`allow b 7:${loop} r`)])
    expect(await can('/dev/zero', 'r'), '/dev/zero with its rule back').to.equal(true)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device, granted r').to.equal(true)
    expect(await can(`/dev/loop${loop}`, 'w'), 'the loop device, not granted w').to.equal(false)
    expect(await can('/dev/null', 'w'), '/dev/null after the replace').to.equal(true)
    expect(await can('/dev/full', 'r'), '/dev/full (base)').to.equal(true)

    // Revoked: the base again, without the loop device.
    replace(runtimeBase)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device, revoked').to.equal(false)
    expect(await can('/dev/zero', 'r')).to.equal(true)
    expect(await fds(), 'file descriptors left open').to.equal(before)
  })

  it('replaces exactly the program it read, and reads it back; a program stacked beside it is refused, and nothing changes', async function () {
    const [runtime] = devicePrograms(cgroup)
    expect(runtime.name).to.equal('runtime')
    replaceDeviceProgram(cgroup, runtime.id, runtimeBase)
    const [first] = devicePrograms(cgroup)
    expect(first.name).to.equal(agentProgramName)
    expect(first.id).to.not.equal(runtime.id)
    expect(first.rules).to.deep.equal(emulateRules(runtimeBase)) // the kernel's copy decompiles to the same rules

    replaceDeviceProgram(cgroup, first.id, [...runtimeBase, rule(`allow b 7:${loop} rw`)])
    const now = devicePrograms(cgroup)
    expect(now).to.have.length(1)
    expect(now[0].id).to.not.equal(first.id)
    expect(now[0].rules?.rules.at(-1)).to.deep.include({access: 'rw', allow: true, major: 7, minor: loop, type: 'b'})

    // Someone stacked a second program (BPF_F_ALLOW_MULTI) beside the one read: not the set that was read.
    attachRuntimeProgram(cgroup, runtimeBase, 'other')
    const stacked = devicePrograms(cgroup)
    expect(stacked.map((p) => p.name)).to.deep.equal([agentProgramName, 'other'])
    expect(() => replaceDeviceProgram(cgroup, now[0].id, runtimeBase)).to.throw(
      ProgramChangedError,
      `the device programs of ${cgroup} changed since they were read (read: id ${now[0].id}; attached now: id ${stacked[0].id}, ${stacked[1].id}); not replaced, read again`,
    )
    expect(
      devicePrograms(cgroup).map((p) => p.id),
      'both untouched',
    ).to.deep.equal(stacked.map((p) => p.id))
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device: the other program does not allow it').to.equal(false)
  })

  it('refuses a replacement when the program changed between read and replace, and the kernel refuses to replace a program no longer attached', async function () {
    const [read] = devicePrograms(cgroup)
    const load = (rules: readonly DeviceProgramRule[], name: string): number => loadDeviceProgram(encodeInstructions(compileDeviceProgram(rules)), 'Apache', name)
    const cgroupFd = openCgroup(cgroup)
    const opened: number[] = []
    try {
      // The runtime updates the container in between (an atomic replace of its own): /dev/zero taken away.
      const updated = load(
        runtimeBase.filter((r) => !(r.type === 'c' && r.major === 1 && r.minor === 5)),
        'updated',
      )
      opened.push(updated)
      const old = programFdById(read.id)
      opened.push(old)
      attachDeviceProgram(cgroupFd, updated, old)
      const [now] = devicePrograms(cgroup)
      expect(now.name).to.equal('updated')

      expect(() => replaceDeviceProgram(cgroup, read.id, [...rulesWithout(read.rules!, new Set()), rule(`allow b 7:${loop} r`)])).to.throw(
        ProgramChangedError,
        `(read: id ${read.id}; attached now: id ${now.id})`,
      )
      expect(
        devicePrograms(cgroup).map((p) => p.id),
        "the runtime's update untouched",
      ).to.deep.equal([now.id])
      expect(await can('/dev/zero', 'r'), '/dev/zero, as the update says').to.equal(false)
      expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device, not granted').to.equal(false)

      // The last step is the kernel's own check: BPF_F_REPLACE of a program that is not attached fails, and changes nothing.
      const mine = load([...runtimeBase, rule(`allow b 7:${loop} r`)], agentProgramName)
      opened.push(mine)
      expect(() => attachDeviceProgram(cgroupFd, mine, old)).to.throw(BpfError, 'bpf(BPF_PROG_ATTACH (BPF_F_REPLACE)) failed: ENOENT')
      expect(devicePrograms(cgroup).map((p) => p.id)).to.deep.equal([now.id])
    } finally {
      for (const fd of opened) closeFd(fd)
      closeFd(cgroupFd)
    }
  })

  it('a container whose runtime attached no /dev/net/tun (runc 1.2.0-1.2.3) does not gain it when its program is rebuilt for a grant, nor when it is taken back', async function () {
    expect(await can('/dev/net/tun', 'r'), "tun under runc 1.1's rules (the check can tell)").to.equal(true)
    detachDevicePrograms(cgroup)
    attachRuntimeProgram(cgroup, runcDeviceRules(criSpec, {tun: false}))
    expect(await can('/dev/net/tun', 'r'), "tun under runc 1.2.0's rules").to.equal(false)

    // What the agent does: the rules read back, without its own devices (none yet), and the grant after them.
    const [read] = devicePrograms(cgroup)
    replaceDeviceProgram(cgroup, read.id, [...rulesWithout(read.rules!, new Set()), rule(`allow b 7:${loop} r`)])
    expect(await can(`/dev/loop${loop}`, 'r'), 'the granted loop device').to.equal(true)
    expect(await can('/dev/net/tun', 'r'), 'tun after the grant').to.equal(false)
    expect(await can('/dev/null', 'w'), "/dev/null, the runtime's").to.equal(true)

    const [granted] = devicePrograms(cgroup)
    replaceDeviceProgram(cgroup, granted.id, rulesWithout(granted.rules!, new Set([`b7:${loop}`])))
    expect(devicePrograms(cgroup)[0].rules, "the runtime's rules again").to.deep.equal(read.rules)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device, taken back').to.equal(false)
    expect(await can('/dev/net/tun', 'r'), 'tun after the revoke').to.equal(false)
  })

  it("agrees with the interpreter's verdicts on a sample of devices and accesses", async function () {
    const rules = [...runtimeBase.filter((r) => !(r.type === 'c' && r.major === 1 && r.minor === 7)), rule('allow c 1:7 w'), rule(`allow b 7:${loop} r`)]
    replace(rules)
    const program = compileDeviceProgram(rules)
    const samples: Array<[string, 'r' | 'w' | 'm', string]> = [
      ['/dev/zero', 'r', 'c 1 5'],
      ['/dev/zero', 'w', 'c 1 5'],
      ['/dev/full', 'r', 'c 1 7'],
      ['/dev/full', 'w', 'c 1 7'],
      [`/dev/loop${loop}`, 'r', `b 7 ${loop}`],
      [`/dev/loop${loop}`, 'w', `b 7 ${loop}`],
      ['', 'm', 'c 1 7'],
      ['', 'm', `b 7 ${loop}`],
      ['', 'm', 'c 4095 1'],
    ]
    const seen: string[] = []
    for (const [device, access, numbers] of samples) {
      const [type, major, minor] = numbers.split(' ')
      const interpreted = runDeviceProgram(program, {access: deviceAccess[access], major: Number(major), minor: Number(minor), type: deviceType[type as 'b' | 'c']}) === 1
      const kernel = await can(device, access, numbers)
      seen.push(`${numbers} ${access}: kernel ${kernel ? 'allows' : 'denies'}`)
      expect(kernel, `${numbers} ${access}: the kernel against the interpreter`).to.equal(interpreted)
    }
    // Both verdicts occur in the sample, so agreement says something.
    expect(seen.some((s) => s.endsWith('allows')) && seen.some((s) => s.endsWith('denies'))).to.equal(true)
  })

  it("a program the verifier refuses is a clear error: the syscall, errno and the verifier's words", function () {
    // Returns without setting r0: the verifier refuses it.
    const bad = Buffer.from('9500000000000000', 'hex')
    let error: unknown
    try {
      closeFd(loadDeviceProgram(bad, 'Apache', 'bad'))
    } catch (e) {
      error = e
    }
    expect(error).to.be.instanceOf(BpfError)
    expect((error as Error).message).to.match(/^bpf\(BPF_PROG_LOAD\) failed: EACCES; the verifier said: .*R0 !read_ok/)
    expect(() => devicePrograms(join(cgroup, 'no-such-child'))).to.throw(/^open\(2\) of cgroup directory .*\/no-such-child failed: ENOENT$/)
  })

  it("no rules is deny-all; runc's base alone opens the standard devices and nothing else", async function () {
    replace([])
    expect(await can('/dev/null', 'r'), '/dev/null with no rules').to.equal(false)
    expect(await can('', 'm', 'c 1 3'), 'mknod with no rules').to.equal(false)
    replace(runtimeBase)
    for (const device of ['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom', '/dev/ptmx']) expect(await can(device, 'r'), device).to.equal(true)
    expect(await can('/dev/null', 'w'), '/dev/null w').to.equal(true)
    expect(await can('', 'm', `b 7 ${loop}`), 'mknod of any block device').to.equal(true)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the loop device').to.equal(false)
  })

  it("loads and attaches a program of 300 allow rules (the verifier's log would overflow), whose last device opens", async function () {
    const many = [rule('deny a'), ...Array.from({length: 299}, (_, i) => rule(`allow b 7:${1000 + i} r`)), rule(`allow b 7:${loop} r`)]
    replace(many)
    const [attached] = devicePrograms(cgroup)
    expect(attached.rules?.rules).to.have.length(300)
    expect(await can(`/dev/loop${loop}`, 'r'), 'the last of 300 rules').to.equal(true)
    expect(await can(`/dev/loop${loop}`, 'w'), 'w, not granted').to.equal(false)
    expect(await can('/dev/null', 'r'), '/dev/null, in none of the rules').to.equal(false)
  })

  it('leaves no file descriptor open when the cgroup is gone (the container exited)', async function () {
    const gone = join(cgroup, 'gone')
    await mkdir(gone)
    await rmdir(gone)
    const program = encodeInstructions(compileDeviceProgram(runtimeBase))
    const before = await fds()
    for (let i = 0; i < 5; i++) {
      expect(() => replaceDeviceProgram(gone, 1, runtimeBase)).to.throw(/ENOENT/)
      expect(() => attachProgram(gone, program, 'other')).to.throw(/ENOENT/)
    }
    expect(await fds(), 'file descriptors left open').to.equal(before)
  })

  it('a program it may not open (no CAP_SYS_ADMIN, as an LSM label would do) is listed as unreadable, never dropped, and not replaced', async function () {
    const [attached] = devicePrograms(cgroup)
    // The same calls in a process without CAP_SYS_ADMIN: BPF_PROG_GET_FD_BY_ID says EPERM.
    const script = `
      const {devicePrograms, replaceDeviceProgram} = await import(${JSON.stringify(new URL('../../src/lib/runtime/device-bpf.ts', import.meta.url).pathname)})
      const listed = devicePrograms(${JSON.stringify(cgroup)})
      let outcome = 'replaced'
      try { replaceDeviceProgram(${JSON.stringify(cgroup)}, ${attached.id}, []) } catch (error) { outcome = error.message }
      console.log(JSON.stringify({listed, outcome}))`
    const {stdout} = await run('setpriv', ['--inh-caps=-sys_admin', '--bounding-set=-sys_admin', '--', process.execPath, '--import', 'tsx', '--input-type=module', '-e', script])
    const {listed, outcome} = JSON.parse(stdout) as {listed: unknown[]; outcome: string}
    expect(listed).to.deep.equal([{id: attached.id, name: '', unreadable: 'EPERM'}])
    expect(outcome).to.match(/^bpf\(BPF_PROG_GET_FD_BY_ID \(id \d+\)\) failed: EPERM$/)
    expect(
      devicePrograms(cgroup).map((p) => p.id),
      'the program untouched',
    ).to.deep.equal([attached.id])
  })
})
