/**
 * The node half of `nfdctl doctor` (`--node`, run by the agent's image on a node): what the agent's start-up
 * check would refuse, said as findings, and the cgroup mode. The command reads the host with the agent's own
 * reader and hands its problems here, so doctor and the agent never disagree. Pure, but for cgroupModeOf.
 */
import {stat} from 'node:fs/promises'
import {join} from 'node:path'

import type {Finding} from './findings.js'

export type CgroupMode = 'v1' | 'v2'

/** v2 when /sys/fs/cgroup is the unified hierarchy (it has cgroup.controllers), else v1 (legacy or hybrid). */
export async function cgroupModeOf(sysRoot = '/sys'): Promise<CgroupMode> {
  return stat(join(sysRoot, 'fs/cgroup/cgroup.controllers')).then(
    () => 'v2' as const,
    () => 'v1' as const,
  )
}

export interface NodeHost {
  readonly cgroupMode: CgroupMode
  /** What the agent's host check finds missing, each line naming the pod-spec field that gives it. */
  readonly problems: readonly string[]
  /** Why containerd's PID namespace could not be compared (containerd did not answer), when it could not. */
  readonly pidNamespaceUnknown?: string
  /**
   * Whether claims' CDI devices reach containers on this runtime, read from its CRI configuration
   * (runtimeCdiProblem): the problem, none, or why it could not be read.
   */
  readonly runtimeCdi: {readonly problem?: string} | {readonly unread: string}
  /** Whether a class of the cluster is a DRA class: a runtime without CDI then fails, else warns. */
  readonly draUsed: boolean
}

export function judgeNode(host: NodeHost): Finding[] {
  const mode: Finding = {
    check: 'cgroup mode',
    feature: 'agent',
    found: host.cgroupMode === 'v2' ? 'cgroup v2: device access by a replaced eBPF device program per container' : 'cgroup v1: device access by the devices controller',
    status: 'ok',
  }
  const problems: Finding[] = host.problems.map((line) => {
    const [found, fix] = splitFix(line)
    return {check: 'host as the agent needs it', feature: 'agent', fix, found, status: 'fail'}
  })
  if (host.problems.length === 0) problems.push({check: 'host as the agent needs it', feature: 'agent', found: "host PID namespace, the host's /dev and writable cgroups", status: 'ok'})
  if (host.pidNamespaceUnknown !== undefined) {
    problems.push({
      check: 'containerd answers',
      feature: 'agent',
      fix: "mount containerd's socket (--containerd-address) into the pod",
      found: `containerd does not answer, so the PID namespace is not checked: ${host.pidNamespaceUnknown}`,
      status: 'warn',
    })
  }
  return [mode, ...problems, cdiFinding(host)]
}

function cdiFinding(host: NodeHost): Finding {
  const check = "containerd's CDI (DRA claims)"
  if ('unread' in host.runtimeCdi) {
    return {
      check,
      feature: 'DRA',
      fix: "mount containerd's socket (--containerd-address) into the pod",
      found: `containerd's CRI configuration cannot be read: ${host.runtimeCdi.unread}`,
      status: 'warn',
    }
  }
  const {problem} = host.runtimeCdi
  if (problem === undefined) return {check, feature: 'DRA', found: "containerd applies CDI devices from the agent's --cdi-dir", status: 'ok'}
  const [found, fix] = splitFix(problem)
  return {check, feature: 'DRA', fix, found, status: host.draUsed ? 'fail' : 'warn'}
}

/** The agent's host problems read "what is wrong: how to fix it"; the last ": " parts them. */
function splitFix(line: string): [string, string] {
  const at = line.lastIndexOf(': ')
  return at < 0 ? [line, "see docs/devices.md for the agent's pod spec"] : [line.slice(0, at), line.slice(at + 2)]
}
