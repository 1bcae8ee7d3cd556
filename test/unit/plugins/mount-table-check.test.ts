import {expect} from 'chai'

import {mountTableProblems, type MountTableFacts} from '../../../src/lib/plugins/mount-table-check.js'

const host: MountTableFacts = {mountTable: {path: '/proc/1/mountinfo'}, pidNamespace: 'host'}

describe("mount-table-check: whether plugins serve sees the node's mount table, and the pod-spec field that gives it", () => {
  it('in the host PID namespace, the table readable: nothing missing', () => {
    expect(mountTableProblems(host)).to.deep.equal([])
  })

  it('without hostPID: kubelet is not visible from here, so /proc/1 is the pod’s own process', () => {
    expect(mountTableProblems({...host, pidNamespace: 'other'})).to.deep.equal([
      "kubelet runs in another PID namespace, so /proc/1/mountinfo is not the node's mount table and the node's mounted disks would be served: run plugins serve in the host's PID namespace (hostPID: true in the pod spec)",
    ])
  })

  it('kubelet not answering, outside the initial PID namespace: not judged, so refused (unlike the agent, which only warns: it has containerd to judge by)', () => {
    const [problem, ...rest] = mountTableProblems({...host, pidNamespace: {unknown: 'kubelet does not answer: cannot connect to /var/lib/kubelet/device-plugins/kubelet.sock: ENOENT'}})
    expect(rest).to.deep.equal([])
    expect(problem).to.contain('cannot connect to /var/lib/kubelet/device-plugins/kubelet.sock: ENOENT')
    expect(problem).to.match(/hostPID: true in the pod spec\)$/)
  })

  it('the table unreadable (hidepid, not root): the file, the error and the fields', () => {
    expect(mountTableProblems({...host, mountTable: {path: '/proc/1/mountinfo', problem: 'EACCES'}})).to.deep.equal([
      "cannot read /proc/1/mountinfo (EACCES): run plugins serve as root (runAsUser: 0 in the pod spec) in the host's PID namespace (hostPID: true)",
    ])
  })

  it('names every problem at once, each on no line of its own', () => {
    const problems = mountTableProblems({mountTable: {path: '/proc/1/mountinfo', problem: 'ENOENT'}, pidNamespace: 'other'})
    expect(problems).to.have.length(2)
    for (const p of problems) expect(p).to.not.contain('\n')
  })
})
