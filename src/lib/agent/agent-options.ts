import {maxDurationMs, parseDurationMs} from '../duration.js'
import {UsageError} from '../errors.js'
import {ownNodeName, type NodeNameSources} from '../kube/node-name.js'
import {observeOptionsFrom, type ObserveOptions, type RawObserveFlags} from '../observe/observe-options.js'
import type {CgroupMode} from '../runtime/device-cgroup.js'

/** The flags of `devices agent` as oclif hands them over. */
export interface RawAgentFlags extends RawObserveFlags {
  readonly 'batch-quiet': string
  readonly 'batch-max-wait': string
  readonly 'node-name'?: string
  readonly workers: number
  readonly 'cgroup-mode': string
  readonly 'containerd-address': string
  readonly 'containerd-namespace': string
  readonly 'plugin-dir': string
  readonly 'pod-resources-socket': string
  readonly 'state-dir': string
  readonly 'kubelet-dir': string
  readonly 'cdi-dir': string
  readonly 'udev-data-dir': string
}

export interface AgentOptions extends ObserveOptions {
  readonly nodeName: string
  readonly quietMs: number
  readonly maxWaitMs: number
  readonly workers: number
  readonly cgroupMode: CgroupMode
}

const cgroupModes: readonly CgroupMode[] = ['auto', 'v1', 'v2']

/** Checks `devices agent`'s flags before anything starts; each mistake is one UsageError that names the flag and the fix. */
export function agentOptionsFrom(flags: RawAgentFlags, stdoutIsTty: boolean, sources: NodeNameSources): AgentOptions {
  const quietMs = duration('batch-quiet', flags['batch-quiet'], true)
  const maxWaitMs = duration('batch-max-wait', flags['batch-max-wait'])
  if (maxWaitMs < quietMs) throw new UsageError(`--batch-max-wait (${flags['batch-max-wait']}) must be at least --batch-quiet (${flags['batch-quiet']})`)
  if (!Number.isInteger(flags.workers) || flags.workers < 1 || flags.workers > 64) throw new UsageError(`--workers must be a whole number from 1 to 64, got ${flags.workers}`)
  if (!(cgroupModes as readonly string[]).includes(flags['cgroup-mode'])) throw new UsageError(`--cgroup-mode must be one of ${cgroupModes.join(', ')}, got "${flags['cgroup-mode']}"`)
  for (const flag of ['containerd-address', 'containerd-namespace', 'plugin-dir', 'pod-resources-socket', 'state-dir', 'kubelet-dir', 'cdi-dir', 'udev-data-dir'] as const) {
    if (flags[flag].trim() === '') throw new UsageError(`--${flag} must not be empty; leave it out for its default`)
  }
  const nodeName = ownNodeName(flags['node-name'], sources)
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(nodeName)) {
    throw new UsageError(`the node name "${nodeName}" is not a valid Node name (lower-case DNS subdomain); pass the Node's name with --node-name or $NODE_NAME`)
  }
  return {
    ...observeOptionsFrom(flags, stdoutIsTty),
    cgroupMode: flags['cgroup-mode'] as CgroupMode,
    maxWaitMs,
    nodeName,
    quietMs,
    workers: flags.workers,
  }
}

function duration(flag: string, text: string, zeroIsOff = false): number {
  const ms = parseDurationMs(text)
  if (ms === undefined || ms < 0 || (ms === 0 && !zeroIsOff)) {
    throw new UsageError(`--${flag} must be a ${zeroIsOff ? 'duration such as 0s (off), 50ms or 1s' : 'positive duration such as 200ms or 1s'}, got "${text}"`)
  }
  if (ms > maxDurationMs) throw new UsageError(`--${flag} must be at most 596h (24 days), got "${text}"`)
  return ms
}
