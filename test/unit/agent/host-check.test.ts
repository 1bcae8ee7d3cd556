import {expect} from 'chai'

import {hostProblems, type HostFacts} from '../../../src/lib/agent/host-check.js'

const host: HostFacts = {cgroups: [{path: '/sys/fs/cgroup/devices'}, {path: '/sys/fs/cgroup/unified'}], devNodes: {inDev: 92, kernel: 92}, pidNamespace: 'same'}

describe('host-check: what the agent needs of the host, and the DaemonSet field that gives it', () => {
  it('the host as the DaemonSet gives it: nothing missing (containerd not answering leaves the PID namespace unjudged)', () => {
    expect(hostProblems(host)).to.deep.equal([])
    expect(hostProblems({...host, pidNamespace: {unknown: 'cannot connect to /run/containerd/containerd.sock: ENOENT'}})).to.deep.equal([])
  })

  it('without hostPID: containerd is in another PID namespace', () => {
    expect(hostProblems({...host, pidNamespace: 'other'})).to.deep.equal([
      "containerd runs in another PID namespace, so the PIDs it reports name no process here: run the agent in the host's PID namespace (hostPID: true in the pod spec)",
    ])
  })

  it("without the host's /dev: the container's own has a handful of the kernel's character devices", () => {
    expect(hostProblems({...host, devNodes: {inDev: 8, kernel: 92}})).to.deep.equal([
      "/dev has 8 of the kernel's 92 character devices, so it is not the host's /dev: mount it (a hostPath volume /dev at /dev)",
    ])
    expect(hostProblems({...host, devNodes: {inDev: 46, kernel: 92}}), 'half is enough (nodes udev removed, renamed)').to.deep.equal([])
  })

  it('a read-only or missing cgroup tree', () => {
    expect(hostProblems({...host, cgroups: [{path: '/sys/fs/cgroup/devices', problem: 'EROFS'}]})).to.deep.equal([
      "/sys/fs/cgroup/devices is not writable (EROFS): mount the host's /sys/fs/cgroup read-write and run as root, privileged",
    ])
    expect(hostProblems({...host, cgroups: []})).to.deep.equal(["no v1 devices or cgroup2 hierarchy is mounted: mount the host's /sys/fs/cgroup (a hostPath volume)"])
  })

  it('names every problem at once', () => {
    expect(hostProblems({cgroups: [{path: '/sys/fs/cgroup', problem: 'EACCES'}], devNodes: {inDev: 0, kernel: 10}, pidNamespace: 'other'})).to.have.length(3)
  })
})
