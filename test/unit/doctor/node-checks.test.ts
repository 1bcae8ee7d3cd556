import {expect} from 'chai'

import {doctorExitCode} from '../../../src/lib/doctor/findings.js'
import {judgeNode} from '../../../src/lib/doctor/node-checks.js'

describe('doctor --node: the host as the agent needs it', function () {
  it("the agent's host problems become failures, each parted into what was found and its fix", function () {
    const findings = judgeNode({
      cgroupMode: 'v2',
      draUsed: false,
      problems: ["/dev has 3 of the kernel's 120 character devices, so it is not the host's /dev: mount it (a hostPath volume /dev at /dev)"],
      runtimeCdi: {},
    })
    expect(findings.map((f) => [f.check, f.status])).to.deep.equal([
      ['cgroup mode', 'ok'],
      ['host as the agent needs it', 'fail'],
      ["containerd's CDI (DRA claims)", 'ok'],
    ])
    expect(findings[1]).to.include({fix: 'mount it (a hostPath volume /dev at /dev)', found: "/dev has 3 of the kernel's 120 character devices, so it is not the host's /dev"})
    expect(doctorExitCode(findings)).to.equal(1)
  })

  it('a host with nothing missing is ok; containerd not answering is a warning', function () {
    const findings = judgeNode({
      cgroupMode: 'v1',
      draUsed: true,
      pidNamespaceUnknown: 'connect ENOENT /run/containerd/containerd.sock',
      problems: [],
      runtimeCdi: {unread: 'connect ENOENT /run/containerd/containerd.sock'},
    })
    expect(findings.map((f) => f.status)).to.deep.equal(['ok', 'ok', 'warn', 'warn'])
    expect(findings[0].found).to.match(/^cgroup v1/)
    expect(doctorExitCode(findings)).to.equal(0)
  })

  it('a runtime without CDI fails where a DRA class exists, and warns where none does, its fix parted out', function () {
    const problem = 'the container runtime has CDI off (enable_cdi = false), so claims never get their devices: set enable_cdi = true'
    const judged = (draUsed: boolean) => judgeNode({cgroupMode: 'v2', draUsed, problems: [], runtimeCdi: {problem}}).find((f) => f.check === "containerd's CDI (DRA claims)")
    expect(judged(true)).to.include({fix: 'set enable_cdi = true', status: 'fail'})
    expect(judged(false)?.status).to.equal('warn')
  })
})
