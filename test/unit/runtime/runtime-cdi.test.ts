import {expect} from 'chai'

import {runtimeCdiProblem} from '../../../src/lib/runtime/runtime-cdi.js'

// The CRI plugin's configuration as containerd's verbose CRI Status gives it (info["config"]), trimmed to the
// keys that matter: containerd 1.7 (pkg/cri/config.PluginConfig: enableCDI, cdiSpecDirs) and 2.x (no enableCDI).
const containerd17 = (enableCDI: boolean) => ({cdiSpecDirs: ['/etc/cdi', '/var/run/cdi'], containerd: {snapshotter: 'overlayfs'}, enableCDI})
const containerd2 = {cdiSpecDirs: ['/etc/cdi', '/var/run/cdi'], containerd: {defaultRuntimeName: 'runc'}}

describe('runtimeCdiProblem: whether claims’ CDI devices reach containers on this runtime', function () {
  it('containerd 1.7 with its default enable_cdi = false: refused, naming the setting', function () {
    expect(runtimeCdiProblem(containerd17(false), '/var/run/cdi')).to.match(/^the container runtime has CDI off \(containerd's enable_cdi = false/)
  })

  it('containerd 1.7 with CDI on, and containerd 2 (no switch): none', function () {
    expect(runtimeCdiProblem(containerd17(true), '/var/run/cdi')).to.equal(undefined)
    expect(runtimeCdiProblem(containerd2, '/var/run/cdi/')).to.equal(undefined)
  })

  it('a --cdi-dir the runtime does not read: refused, naming both, whatever the version', function () {
    expect(runtimeCdiProblem(containerd2, '/opt/cdi')).to.equal(
      "the container runtime reads CDI specs from /etc/cdi, /var/run/cdi, not from /opt/cdi where the agent writes them (--cdi-dir), so claims' devices never reach their containers: add /opt/cdi to containerd's cdi_spec_dirs, or give the agent one of those as --cdi-dir",
    )
    expect(runtimeCdiProblem({...containerd17(true), cdiSpecDirs: []}, '/var/run/cdi')).to.match(/reads CDI specs from no directory/)
  })

  it('a runtime that says no configuration (no CRI plugin, another runtime): nothing to judge by', function () {
    expect(runtimeCdiProblem(undefined, '/var/run/cdi')).to.equal(undefined)
    expect(runtimeCdiProblem({}, '/var/run/cdi')).to.equal(undefined)
  })

  it('an agent in a pod names the host directory by its own path: the runtime reading it under another path is no problem', function () {
    // runtimeSeesDir compares the directories by inode through the runtime's root; here a stand-in says which is ours.
    expect(runtimeCdiProblem(containerd2, '/var/run/cdi-in-pod', (dir) => dir === '/var/run/cdi')).to.equal(undefined)
    expect(runtimeCdiProblem(containerd2, '/var/run/cdi', () => false)).to.match(/^the container runtime reads CDI specs from/)
  })
})
