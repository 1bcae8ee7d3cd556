import {readFile, readlink} from 'node:fs/promises'
import {join} from 'node:path'

import {errorMessage, ExitCode, NfdctlError} from '../errors.js'
import {socketPeerPid} from '../sys/peer-credentials.js'

/**
 * What plugins serve needs to see the node's own mount table, found at start-up. /proc/1/mountinfo is the
 * table of PID 1 of this process's PID namespace: the node's init only in the host's PID namespace; in a
 * pod's own it is the pod's, where the node's /boot, / and data disks are not mounted, and a class would
 * serve them.
 */
export interface MountTableFacts {
  /**
   * This PID namespace against the node's, judged as the agent judges it, by kubelet (the peer of its socket
   * in --plugin-dir): 'host' when kubelet is visible from here (its PID is not 0), or when kubelet does not
   * answer and this is the kernel's initial PID namespace; 'other' when kubelet's PID is 0 here; otherwise
   * why it could not be told. /proc/1/ns/* is not read: some hosts close it even to root.
   */
  readonly pidNamespace: 'host' | 'other' | {readonly unknown: string}
  /** /proc/1/mountinfo could be read, or why not. */
  readonly mountTable: {readonly path: string; readonly problem?: string}
}

/** Pure: each thing plugins serve lacks to see the node's mount table, with the pod-spec field that gives it. */
export function mountTableProblems(facts: MountTableFacts): string[] {
  const problems: string[] = []
  const hostPid = "run plugins serve in the host's PID namespace (hostPID: true in the pod spec)"
  if (facts.pidNamespace === 'other')
    problems.push(`kubelet runs in another PID namespace, so /proc/1/mountinfo is not the node's mount table and the node's mounted disks would be served: ${hostPid}`)
  else if (typeof facts.pidNamespace === 'object') {
    problems.push(
      `cannot tell whether /proc/1/mountinfo is the node's mount table (${facts.pidNamespace.unknown}, and this is not the kernel's initial PID namespace): start it once kubelet answers, and ${hostPid}`,
    )
  }
  const {path, problem} = facts.mountTable
  if (problem !== undefined) problems.push(`cannot read ${path} (${problem}): run plugins serve as root (runAsUser: 0 in the pod spec) in the host's PID namespace (hostPID: true)`)
  return problems
}

/** plugins serve cannot judge the node's disks here; the message names what is missing and how to give it. */
class MountTableCheckError extends NfdctlError {
  constructor(problems: readonly string[]) {
    super(`plugins serve cannot see the node's mounts: ${problems.join('; ')}`, ExitCode.failed)
  }
}

export interface MountTableCheckOptions {
  /** kubelet's device-plugin directory, where its kubelet.sock is. */
  readonly pluginDir: string
  /** For tests: another /proc. */
  readonly procRoot?: string
}

/** The kernel's initial PID namespace has this inode number (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
const initialPidNamespace = 'pid:[4026531836]'

async function readMountTableFacts(options: MountTableCheckOptions): Promise<MountTableFacts> {
  const proc = options.procRoot ?? '/proc'
  const path = join(proc, '1/mountinfo')
  const mountTable = await readFile(path, 'utf8').then(
    () => ({path}),
    (error: unknown) => ({path, problem: (error as NodeJS.ErrnoException).code ?? errorMessage(error)}),
  )
  return {mountTable, pidNamespace: await pidNamespaceOf(join(options.pluginDir, 'kubelet.sock'), proc)}
}

/** Checks at start-up: MountTableCheckError naming every problem. */
export async function checkMountTable(options: MountTableCheckOptions): Promise<MountTableFacts> {
  const facts = await readMountTableFacts(options)
  const problems = mountTableProblems(facts)
  if (problems.length > 0) throw new MountTableCheckError(problems)
  return facts
}

async function pidNamespaceOf(kubeletSocket: string, proc: string): Promise<MountTableFacts['pidNamespace']> {
  try {
    return socketPeerPid(kubeletSocket) === 0 ? 'other' : 'host'
  } catch (error) {
    const mine = await readlink(join(proc, 'self/ns/pid')).catch(() => undefined)
    return mine === initialPidNamespace ? 'host' : {unknown: `kubelet does not answer: ${errorMessage(error)}`}
  }
}
