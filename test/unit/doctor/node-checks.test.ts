import {expect} from 'chai'

import {doctorExitCode} from '../../../src/lib/doctor/findings.js'
import {judgeNode} from '../../../src/lib/doctor/node-checks.js'

describe('doctor --node: the host as the agent needs it', function () {
  it("the agent's host problems become failures, each parted into what was found and its fix", function () {
    const findings = judgeNode({
      cgroupMode: 'v2',
      problems: ["/dev has 3 of the kernel's 120 character devices, so it is not the host's /dev: mount it (a hostPath volume /dev at /dev)"],
    })
    expect(findings.map((f) => [f.check, f.status])).to.deep.equal([
      ['cgroup mode', 'ok'],
      ['host as the agent needs it', 'fail'],
    ])
    expect(findings[1]).to.include({fix: 'mount it (a hostPath volume /dev at /dev)', found: "/dev has 3 of the kernel's 120 character devices, so it is not the host's /dev"})
    expect(doctorExitCode(findings)).to.equal(1)
  })

  it('a host with nothing missing is ok; containerd not answering is a warning', function () {
    const findings = judgeNode({cgroupMode: 'v1', pidNamespaceUnknown: 'connect ENOENT /run/containerd/containerd.sock', problems: []})
    expect(findings.map((f) => f.status)).to.deep.equal(['ok', 'ok', 'warn'])
    expect(findings[0].found).to.match(/^cgroup v1/)
    expect(doctorExitCode(findings)).to.equal(0)
  })
})
