import {expect} from 'chai'
import type {ChildProcess} from 'node:child_process'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {DoctorReport} from '../../src/lib/doctor/findings.js'
import {ContainerdClient} from '../../src/lib/runtime/containerd-client.js'
import {runtimeCdiProblem} from '../../src/lib/runtime/runtime-cdi.js'
import {ensureBinaries} from '../../harness/controlplane/paths.js'
import {launchDaemon, terminate} from '../../harness/process/daemon.js'
import {waitFor} from '../../harness/process/wait.js'
import {sharedControlPlane} from '../support/cluster.js'
import {missingPrerequisite} from '../support/prerequisites.js'
import {nfdctl} from '../support/run-cli.js'

// containerd 1.7 (the runtime of many 1.34 nodes) ships its CRI plugin with enable_cdi = false: the claims of
// the DRA driver would start their containers without their devices. What the agent and doctor read of it is
// containerd's own CRI configuration (a verbose CRI Status on its socket); here a real containerd 1.7 answers,
// with CDI off and then on. No kubelet runs on it: the node tests run containerd 2.4.2.
describe('containerd 1.7: its CDI setting as the agent and doctor --node read it', function () {
  let dir: string
  let binary: string
  let containerd: ChildProcess | undefined
  const socket = (): string => join(dir, 'run', 'containerd.sock')

  const start = async (enableCdi: boolean): Promise<void> => {
    await writeFile(
      join(dir, 'config.toml'),
      `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "${socket()}"
[ttrpc]
  address = "${socket()}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = ${enableCdi}
  cdi_spec_dirs = ["${dir}/cdi"]
`,
    )
    containerd = launchDaemon(binary, ['--config', join(dir, 'config.toml')], {logFile: join(dir, `containerd-${enableCdi}.log`)})
    const client = new ContainerdClient({address: socket(), namespace: 'k8s.io', timeoutMs: 2000})
    await waitFor('containerd 1.7 answering CRI Status', () => client.criConfig().catch(() => undefined), {timeoutMs: 30_000}).finally(() => client.close())
  }
  const stop = async (): Promise<void> => {
    await terminate(containerd?.pid, containerd)
    containerd = undefined
  }
  const doctorSays = async (context: Mocha.Context): Promise<DoctorReport['findings'][number] | undefined> => {
    const plane = await sharedControlPlane(context)
    const run = await nfdctl<DoctorReport>(['doctor', '--kubeconfig', plane.kubeconfig, '--node', '--containerd-address', socket(), '--cdi-dir', join(dir, 'cdi'), '-o', 'json'])
    return (JSON.parse(run.stdout) as DoctorReport).findings.find((f) => f.check === "containerd's CDI (DRA claims)")
  }

  before(async function () {
    this.timeout(15 * 60_000) // a cold build of containerd 1.7
    if (process.getuid?.() !== 0) missingPrerequisite(this, 'containerd needs root')
    binary = join(await ensureBinaries(() => {}, ['containerd-1.7']), 'containerd-1.7')
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-c17-'))
    await mkdir(join(dir, 'cdi'))
  })

  after(async function () {
    await stop()
    if (dir !== undefined) await rm(dir, {force: true, recursive: true})
  })

  it('with its default enable_cdi = false: the CRI configuration says enableCDI false, the claims would be refused, and doctor --node fails it with the fix', async function () {
    this.timeout(60_000)
    await start(false)
    const client = new ContainerdClient({address: socket(), namespace: 'k8s.io'})
    const config = await client.criConfig().finally(() => client.close())
    expect(config).to.include({enableCDI: false})
    expect(runtimeCdiProblem(config, join(dir, 'cdi'))).to.match(/^the container runtime has CDI off \(containerd's enable_cdi = false/)
    // A failure where the cluster has a DRA class, else a warning: the shared control plane may hold one.
    const finding = await doctorSays(this)
    expect(finding?.fix).to.equal("set enable_cdi = true in containerd's CRI plugin config and restart it, or run containerd 2")
    expect(finding?.status).to.be.oneOf(['warn', 'fail'])
    await stop()
  })

  it('with enable_cdi = true and the agent’s directory in cdi_spec_dirs: nothing to refuse, doctor --node ok', async function () {
    this.timeout(60_000)
    await start(true)
    const client = new ContainerdClient({address: socket(), namespace: 'k8s.io'})
    const config = await client.criConfig().finally(() => client.close())
    expect(config).to.include({enableCDI: true})
    expect(runtimeCdiProblem(config, join(dir, 'cdi'))).to.equal(undefined)
    expect(await doctorSays(this)).to.include({status: 'ok'})
  })
})
