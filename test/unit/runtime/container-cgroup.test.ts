import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {CgroupMismatchError, cgroupOfSpec, deviceControlOf, isContainerCgroup} from '../../../src/lib/runtime/device-cgroup.js'

const id = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'

describe('a container\'s own cgroup: from its OCI linux.cgroupsPath, checked against its process', function () {
  it('reads cgroupfs paths as they are and expands systemd\'s slice:prefix:name as runc does', function () {
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

  it('is the container\'s when the path is its cgroup (or ends with it, as a cgroup namespace shows), or, without one, names its id', function () {
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

  describe('deviceControlOf with the container given', function () {
    let proc: string

    beforeEach(async function () {
      proc = await mkdtemp(join(tmpdir(), 'nfdctl-proc-'))
      await mkdir(join(proc, '42'))
      await mkdir(join(proc, 'self'))
      await writeFile(join(proc, 'self', 'mounts'), 'cgroup /sys/fs/cgroup/devices cgroup rw,devices 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n')
    })

    afterEach(async function () {
      await rm(proc, {force: true, recursive: true})
    })

    it('returns the cgroup when the process is in it, and refuses a process in another (a reused PID)', async function () {
      const cgroup = `/kubepods/besteffort/pod1/${id}`
      await writeFile(join(proc, '42', 'cgroup'), `5:devices:${cgroup}\n0::${cgroup}\n`)
      expect(await deviceControlOf(42, {container: {cgroup, id}, procRoot: proc})).to.deep.equal({dir: `/sys/fs/cgroup/devices${cgroup}`, mode: 'v1'})
      expect(await deviceControlOf(42, {container: {cgroup, id}, mode: 'v2', procRoot: proc})).to.deep.include({dir: `/sys/fs/cgroup/unified${cgroup}`})
      expect(await deviceControlOf(42, {container: {id}, procRoot: proc})).to.deep.equal({dir: `/sys/fs/cgroup/devices${cgroup}`, mode: 'v1'})

      await writeFile(join(proc, '42', 'cgroup'), '5:devices:/user.slice\n0::/user.slice/session-3.scope\n')
      const error = await deviceControlOf(42, {container: {cgroup, id}, procRoot: proc}).catch((e: Error) => e)
      expect(error).to.be.instanceOf(CgroupMismatchError)
      expect((error as Error).message).to.equal(`process 42 is in cgroup /user.slice, not in container ${id}'s ${cgroup} (its linux.cgroupsPath)`)
      expect(await deviceControlOf(42, {container: {id}, procRoot: proc}).catch((e: Error) => e.message)).to.equal(`process 42 is in cgroup /user.slice, not in container ${id}'s one named after container ${id}`)
      // Every directory used is checked: on v2 with a v1 devices cgroup beside it, both.
      await writeFile(join(proc, '42', 'cgroup'), `5:devices:/elsewhere\n0::${cgroup}\n`)
      expect(await deviceControlOf(42, {container: {cgroup, id}, mode: 'v2', procRoot: proc}).catch((e: Error) => e)).to.be.instanceOf(CgroupMismatchError)
    })
  })
})
