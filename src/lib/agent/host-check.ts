import {accessSync, constants} from 'node:fs'
import {readdir, readFile, readlink, stat} from 'node:fs/promises'
import {join} from 'node:path'

import {errorMessage, ExitCode, NfdctlError} from '../errors.js'
import {socketPeerPid} from '../sys/peer-credentials.js'

/** What the agent needs of the host, as found at start-up. */
export interface HostFacts {
  /**
   * containerd's process against this one's PID namespace: 'same', 'other' (its PID is 0 here, or it has
   * another PID namespace), or why it could not be told (containerd does not answer).
   */
  readonly pidNamespace: 'same' | 'other' | {readonly unknown: string}
  /** The character devices the kernel has (with a node name) and how many of them /dev has. */
  readonly devNodes: {readonly kernel: number; readonly inDev: number}
  /** The cgroup hierarchies device rules are written to (v1 devices, cgroup2), and why one is not writable. */
  readonly cgroups: ReadonlyArray<{readonly path: string; readonly problem?: string}>
}

/** Below this share of the kernel's character devices, /dev is a container's own tmpfs (a handful of nodes), not the host's. */
const hostDevShare = 0.5

/** Pure: each thing the agent lacks, with the DaemonSet field that gives it. */
export function hostProblems(facts: HostFacts): string[] {
  const problems: string[] = []
  if (facts.pidNamespace === 'other') {
    problems.push("containerd runs in another PID namespace, so the PIDs it reports name no process here: run the agent in the host's PID namespace (hostPID: true in the pod spec)")
  }
  const {inDev, kernel} = facts.devNodes
  if (kernel > 0 && inDev < kernel * hostDevShare) {
    problems.push(`/dev has ${inDev} of the kernel's ${kernel} character devices, so it is not the host's /dev: mount it (a hostPath volume /dev at /dev)`)
  }
  if (facts.cgroups.length === 0) problems.push("no v1 devices or cgroup2 hierarchy is mounted: mount the host's /sys/fs/cgroup (a hostPath volume)")
  for (const {path, problem} of facts.cgroups) {
    if (problem !== undefined) problems.push(`${path} is not writable (${problem}): mount the host's /sys/fs/cgroup read-write and run as root, privileged`)
  }
  return problems
}

/** The agent cannot do its job here; the message names what is missing and how to give it. */
class HostCheckError extends NfdctlError {
  constructor(problems: readonly string[]) {
    super(`the agent cannot work here: ${problems.join('; ')}`, ExitCode.failed)
  }
}

export interface HostCheckOptions {
  readonly containerdAddress: string
  /** For tests: another /proc, /sys and /dev. */
  readonly procRoot?: string
  readonly sysRoot?: string
  readonly devRoot?: string
}

/** Reads the facts hostProblems() judges (also for `doctor --node`, which reports them instead of refusing). */
export async function readHostFacts(options: HostCheckOptions): Promise<HostFacts> {
  const proc = options.procRoot ?? '/proc'
  const [pidNamespace, devNodes, cgroups] = await Promise.all([pidNamespaceOf(options.containerdAddress, proc), devNodesOf(options.sysRoot ?? '/sys', options.devRoot ?? '/dev'), cgroupsOf(proc)])
  return {cgroups, devNodes, pidNamespace}
}

/** Checks the host at start-up: HostCheckError naming every problem. */
export async function checkHost(options: HostCheckOptions): Promise<HostFacts> {
  const facts = await readHostFacts(options)
  const problems = hostProblems(facts)
  if (problems.length > 0) throw new HostCheckError(problems)
  return facts
}

async function pidNamespaceOf(containerdAddress: string, proc: string): Promise<HostFacts['pidNamespace']> {
  let pid: number
  try {
    pid = socketPeerPid(containerdAddress)
  } catch (error) {
    return {unknown: errorMessage(error)}
  }
  if (pid === 0) return 'other'
  const [mine, theirs] = await Promise.all([readlink(join(proc, 'self/ns/pid')), readlink(join(proc, String(pid), 'ns/pid')).catch(() => undefined)])
  return mine === theirs ? 'same' : 'other'
}

async function devNodesOf(sys: string, dev: string): Promise<HostFacts['devNodes']> {
  const entries = await readdir(join(sys, 'dev/char')).catch(() => [])
  const names = await Promise.all(
    entries.map(async (entry) => {
      const uevent = await readFile(join(sys, 'dev/char', entry, 'uevent'), 'utf8').catch(() => '')
      return /^DEVNAME=(.+)$/m.exec(uevent)?.[1]
    }),
  )
  const named = names.filter((n): n is string => n !== undefined)
  const present = await Promise.all(
    named.map((name) =>
      stat(join(dev, name)).then(
        () => true,
        () => false,
      ),
    ),
  )
  return {inDev: present.filter(Boolean).length, kernel: named.length}
}

async function cgroupsOf(proc: string): Promise<HostFacts['cgroups']> {
  const mounts = (await readFile(join(proc, 'self/mounts'), 'utf8')).split('\n').map((l) => l.split(' '))
  const paths = mounts.filter((f) => f[2] === 'cgroup2' || (f[2] === 'cgroup' && (f[3] ?? '').split(',').includes('devices'))).map((f) => f[1])
  return [...new Set(paths)].map((path) => {
    try {
      accessSync(path, constants.W_OK)
      return {path}
    } catch (error) {
      return {path, problem: (error as NodeJS.ErrnoException).code ?? errorMessage(error)}
    }
  })
}
