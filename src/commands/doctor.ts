import * as Flags from '@oclif/core/flags'

import {clusterFlags} from '../cli/kube-flags.js'
import {NfdctlCommand} from '../cli/nfdctl-command.js'
import {renderDoctor} from '../cli/render-doctor.js'
import type {OutputFormat} from '../cli/render-sweep.js'
import {judgeCluster, usedFeatures} from '../lib/doctor/cluster-checks.js'
import {readClusterFacts} from '../lib/doctor/cluster-facts.js'
import {doctorExitCode, type DoctorReport, type Finding} from '../lib/doctor/findings.js'
import {cgroupModeOf, judgeNode} from '../lib/doctor/node-checks.js'
import {errorMessage} from '../lib/errors.js'
import {openCluster} from '../lib/kube/connect.js'

export default class Doctor extends NfdctlCommand {
  static override description =
    `Read the cluster and say, per feature nfdctl offers (gc, device plugins, agent, DRA, DRA by limit, device taints, admission policies), whether it works here and what to change.

Reads the API server's and kubelets' versions, what the API server serves (resource.k8s.io/v1, ValidatingAdmissionPolicy), whether it keeps a DeviceClass's extendedResourceName and device taints (server-side dry-run creates, which persist nothing and need create permission: a refusal is a warning), the DeviceClass CRD against the one this nfdctl ships, which selected nodes' agents report each class and whether the agents' pods are Ready, and whether each DRA class is published as a resource.k8s.io DeviceClass.

With --node (the agent's image on a node, with the agent's pod spec): also this host as the agent needs it (the host's PID namespace, /dev and writable cgroups, the same check the agent makes at start), the cgroup mode, and whether containerd hands claims' CDI devices to containers (its CRI configuration: enable_cdi, and cdi_spec_dirs against --cdi-dir).

A feature a class of the cluster uses that does not work fails; one no class uses is a warning. Without the DeviceClass CRD, the device features are reported not installed (a warning: gc needs no CRD of its own).

Exit codes: 0 every feature the cluster's classes use works, 1 some does not, or doctor cannot read what it needs to tell (the API server, nodes, pods, the CRD, the classes), 2 bad flags or configuration.`
  static override enableJsonFlag = true
  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --context prod -o yaml',
    'kubectl -n nfdctl-system exec ds/nfdctl-agent -- node /usr/local/lib/nfdctl/bin/run.js <%= command.id %> --node',
  ]
  static override flags = {
    ...clusterFlags,
    'cdi-dir': Flags.string({default: '/var/run/cdi', description: "with --node: where the agent writes claims' CDI specs (its --cdi-dir)"}),
    'containerd-address': Flags.string({default: '/run/containerd/containerd.sock', description: "with --node: containerd's gRPC socket"}),
    node: Flags.boolean({description: "also check this host as the agent needs it (run in the agent's pod)"}),
    output: Flags.option({char: 'o', default: 'table', description: 'output format', options: ['table', 'json', 'yaml'] as const})(),
  }

  async run(): Promise<DoctorReport> {
    const {flags} = await this.parse(Doctor)
    const {client, origin} = await openCluster({context: flags.context, kubeconfig: flags.kubeconfig}, {maxConnections: 8})
    try {
      const facts = await readClusterFacts(client, this.signal)
      const findings = [...judgeCluster(facts), ...(flags.node ? await this.nodeFindings(flags['containerd-address'], flags['cdi-dir'], usedFeatures(facts.classes).dra) : [])]
      const report: DoctorReport = {findings, server: origin}
      if (!this.jsonEnabled()) this.log(renderDoctor(report, flags.output as OutputFormat))
      process.exitCode = doctorExitCode(findings)
      return report
    } finally {
      client.close()
    }
  }

  /** The agent's own host reader and check, reported instead of refused. */
  private async nodeFindings(containerdAddress: string, cdiDir: string, draUsed: boolean): Promise<Finding[]> {
    // Loaded only here: the host check's system calls load koffi, which the cluster checks need not pay for.
    const [{hostProblems, readHostFacts}, {ContainerdClient}, {runtimeCdiProblem, runtimeSeesDir}] = await Promise.all([
      import('../lib/agent/host-check.js'),
      import('../lib/runtime/containerd-client.js'),
      import('../lib/runtime/runtime-cdi.js'),
    ])
    const facts = await readHostFacts({containerdAddress})
    const pidNamespaceUnknown = typeof facts.pidNamespace === 'object' ? facts.pidNamespace.unknown : undefined
    const containerd = new ContainerdClient({address: containerdAddress, namespace: 'k8s.io', timeoutMs: 3000})
    const runtimeCdi = await containerd.criConfig().then(
      (config) => ({problem: runtimeCdiProblem(config, cdiDir, runtimeSeesDir(containerdAddress, cdiDir))}),
      (error: unknown) => ({unread: errorMessage(error)}),
    )
    containerd.close()
    return judgeNode({cgroupMode: await cgroupModeOf(), draUsed, pidNamespaceUnknown, problems: hostProblems(facts), runtimeCdi})
  }
}
