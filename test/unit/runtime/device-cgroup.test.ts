import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {CgroupMismatchError, cgroupOfSpec, deviceControlOf, formatRule, isContainerCgroup, parseDeviceRules} from '../../../src/lib/runtime/device-cgroup.js'
import {rejection} from '../../support/thrown.js'

const hybridMounts = `cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,nodev,noexec,relatime,devices 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
`
const id = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'
const v2Mounts = 'cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n'

describe('device cgroup of a process', function () {
  let proc: string

  beforeEach(async function () {
    proc = await mkdtemp(join(tmpdir(), 'nfdctl-proc-'))
    await mkdir(join(proc, '42'))
    await mkdir(join(proc, 'self'))
  })

  afterEach(async function () {
    await rm(proc, {force: true, recursive: true})
  })

  const given = async (cgroup: string, mounts: string): Promise<void> => {
    await writeFile(join(proc, '42', 'cgroup'), cgroup)
    await writeFile(join(proc, 'self', 'mounts'), mounts)
  }

  it('on cgroup v1 (hybrid, as here): the devices controller directory', async function () {
    await given('5:devices:/kubepods/besteffort/pod1/abc\n0::/kubepods/besteffort/pod1/abc\n', hybridMounts)
    expect(await deviceControlOf(42, {procRoot: proc})).to.deep.equal({dir: '/sys/fs/cgroup/devices/kubepods/besteffort/pod1/abc', mode: 'v1'})
  })

  it('on a v2-only host: the unified directory (v2)', async function () {
    await given('0::/kubepods.slice/abc.scope\n', v2Mounts)
    expect(await deviceControlOf(42, {procRoot: proc})).to.deep.equal({dir: '/sys/fs/cgroup/kubepods.slice/abc.scope', mode: 'v2'})
    expect(await deviceControlOf(42, {mode: 'v1', procRoot: proc}).catch((e: Error) => e.message)).to.equal('process 42 has no v1 devices cgroup (cgroup v2 only): use --cgroup-mode auto or v2')
  })

  it('on a hybrid host, auto picks v2 when the unified directory carries a device program (both then decide), and a mode is obeyed', async function () {
    await given('5:devices:/kubepods/besteffort/pod1/abc\n0::/kubepods/besteffort/pod1/abc\n', hybridMounts)
    const unified = '/sys/fs/cgroup/unified/kubepods/besteffort/pod1/abc'
    const v1 = '/sys/fs/cgroup/devices/kubepods/besteffort/pod1/abc'
    const asked: string[] = []
    const withProgram = (dir: string): boolean => asked.push(dir) > 0
    expect(await deviceControlOf(42, {hasDeviceProgram: withProgram, procRoot: proc})).to.deep.equal({dir: unified, mode: 'v2', v1Dir: v1})
    expect(asked).to.deep.equal([unified])
    expect(await deviceControlOf(42, {hasDeviceProgram: () => false, procRoot: proc})).to.deep.equal({dir: v1, mode: 'v1'})
    expect(await deviceControlOf(42, {mode: 'v2', procRoot: proc})).to.deep.equal({dir: unified, mode: 'v2', v1Dir: v1})
    expect(await deviceControlOf(42, {hasDeviceProgram: withProgram, mode: 'v1', procRoot: proc})).to.deep.equal({dir: v1, mode: 'v1'})
  })

  it('says so when a process has neither', async function () {
    await given('1:name=systemd:/\n', '')
    expect((await rejection(deviceControlOf(42, {procRoot: proc}))).message).to.equal('process 42 has neither a v1 devices cgroup nor a cgroup v2 one')
  })

  it('with the container given: returns the cgroup when the process is in it, and refuses a process in another (a reused PID)', async function () {
    const cgroup = `/kubepods/besteffort/pod1/${id}`
    await given(`5:devices:${cgroup}\n0::${cgroup}\n`, hybridMounts)
    expect(await deviceControlOf(42, {container: {cgroup, id}, procRoot: proc})).to.deep.equal({dir: `/sys/fs/cgroup/devices${cgroup}`, mode: 'v1'})
    expect(await deviceControlOf(42, {container: {cgroup, id}, mode: 'v2', procRoot: proc})).to.deep.include({dir: `/sys/fs/cgroup/unified${cgroup}`})
    expect(await deviceControlOf(42, {container: {id}, procRoot: proc})).to.deep.equal({dir: `/sys/fs/cgroup/devices${cgroup}`, mode: 'v1'})

    await writeFile(join(proc, '42', 'cgroup'), '5:devices:/user.slice\n0::/user.slice/session-3.scope\n')
    const error = await deviceControlOf(42, {container: {cgroup, id}, procRoot: proc}).catch((e: Error) => e)
    expect(error).to.be.instanceOf(CgroupMismatchError)
    expect((error as Error).message).to.equal(`process 42 is in cgroup /user.slice, not in container ${id}'s ${cgroup} (its linux.cgroupsPath)`)
    expect(await deviceControlOf(42, {container: {id}, procRoot: proc}).catch((e: Error) => e.message)).to.equal(
      `process 42 is in cgroup /user.slice, not in container ${id}'s one named after container ${id}`,
    )
    // Every directory used is checked: on v2 with a v1 devices cgroup beside it, both.
    await writeFile(join(proc, '42', 'cgroup'), `5:devices:/elsewhere\n0::${cgroup}\n`)
    expect(await deviceControlOf(42, {container: {cgroup, id}, mode: 'v2', procRoot: proc}).catch((e: Error) => e)).to.be.instanceOf(CgroupMismatchError)
  })

  it('parses and formats devices.list rules', function () {
    const rules = parseDeviceRules('b *:* m\nc 1:3 rwm\nb 7:300 r\n')
    expect(rules).to.deep.equal([
      {access: 'm', major: '*', minor: '*', type: 'b'},
      {access: 'rwm', major: 1, minor: 3, type: 'c'},
      {access: 'r', major: 7, minor: 300, type: 'b'},
    ])
    expect(rules.map(formatRule)).to.deep.equal(['b *:* m', 'c 1:3 rwm', 'b 7:300 r'])
    expect(() => parseDeviceRules('x 1:2 r')).to.throw('unexpected devices.list line "x 1:2 r"')
  })
})

describe("a container's own cgroup: from its OCI linux.cgroupsPath, checked against its process", function () {
  it("reads cgroupfs paths as they are and expands systemd's slice:prefix:name as runc does", function () {
    const cases: Array<[string, string]> = [
      [`/kubepods/besteffort/pod1/${id}`, `/kubepods/besteffort/pod1/${id}`],
      [`/nfdctl-node/kubepods/burstable/pod2/${id}`, `/nfdctl-node/kubepods/burstable/pod2/${id}`],
      [`kubepods-besteffort-pod1.slice:cri-containerd:${id}`, `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-${id}.scope`],
      [`kubepods.slice:cri-containerd:${id}`, `/kubepods.slice/cri-containerd-${id}.scope`],
      [`:docker:${id}`, `/system.slice/docker-${id}.scope`],
      [`-.slice::${id}`, `/${id}.scope`],
      ['system.slice::machine.slice', '/system.slice/machine.slice'],
    ]
    for (const [cgroupsPath, cgroup] of cases) expect(cgroupOfSpec(cgroupsPath), cgroupsPath).to.equal(cgroup)
    expect(() => cgroupOfSpec(`kubepods:cri-containerd:${id}`)).to.throw('invalid systemd slice "kubepods" in cgroupsPath')
  })

  it("is the container's when the path is its cgroup (or ends with it, as a cgroup namespace shows), or, without one, names its id", function () {
    const cgroup = `/kubepods/besteffort/pod1/${id}`
    const table: Array<[string, {id: string; cgroup?: string}, boolean]> = [
      [cgroup, {cgroup, id}, true],
      [`/nfdctl-node${cgroup}`, {cgroup, id}, true],
      [cgroup, {cgroup: `${cgroup}/`, id}, true],
      [`${cgroup}/escaped`, {cgroup, id}, false], // a child it made: not the container's own
      ['/kubepods/besteffort/pod1/other', {cgroup, id}, false],
      [`/x${id}`, {cgroup: `/${id}`, id}, false], // a suffix only at a path boundary
      ['/user.slice/user-0.slice/session-1.scope', {cgroup, id}, false],
      [`/kubepods.slice/cri-containerd-${id}.scope`, {id}, true],
      [`/kubepods/pod1/${id}/sub`, {id}, false],
      ['/', {id: ''}, false],
    ]
    for (const [path, container, expected] of table) expect(isContainerCgroup(path, container), `${path} ${JSON.stringify(container)}`).to.equal(expected)
  })
})
