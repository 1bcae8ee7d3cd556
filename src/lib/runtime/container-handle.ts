import {closeRoot, openRoot, type RootDir} from '../sys/path-inside.js'
import {PinnedProcess, ProcessGoneError, processStat} from '../sys/pidfd.js'
import type {RuntimeContainer} from './containerd-client.js'
import {judgeRoot, type RootVerdict} from './container-rootfs.js'
import {CgroupMismatchError, cgroupOfSpec, deviceControlOf, type DeviceControl, type DeviceControlOptions} from './device-cgroup.js'

/**
 * A container's init process went away, or its PID names a process that is not the container's (a PID
 * reused, or a process outside its cgroup): nothing is written through it; the next batch looks again.
 */
export class ContainerGoneError extends Error {
  constructor(
    readonly containerId: string,
    readonly pid: number,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`container ${containerId}: process ${pid} ${detail}; nothing is written through it`, options)
  }
}

export interface ContainerHandleOptions extends Omit<DeviceControlOptions, 'container' | 'procRoot'> {
  /** false: as on a kernel without openat2 (tests). */
  readonly openat2?: boolean
  /** false: as on a kernel without pidfd_open (tests). */
  readonly pidfd?: boolean
  /** What an earlier handle of the same process found of its /dev (judged again if its /dev is another mount). */
  readonly devVerdict?: RootDir['devVerdict']
  /** What an earlier handle of the same container found of its root (ContainerHandle.rootVerdict). */
  readonly rootVerdict?: RootVerdict
  /**
   * What an earlier handle found and checked of the process (ContainerHandle.checked): when the PID still
   * names that process (the same start time), its device cgroup is not looked up again.
   */
  readonly checked?: CheckedProcess
}

/** A container process's device cgroup, checked against the container's; the process known by its start time. */
export interface CheckedProcess {
  readonly startTime: bigint
  readonly control: DeviceControl
}

/**
 * One running container, pinned while its devices change: its init process (a pidfd), its root directory
 * (one O_PATH fd, which device nodes are made beneath) and its device cgroup, found from that process and
 * checked against the container's own (its OCI spec's linux.cgroupsPath, or its id where the spec names
 * none). The root is checked to be the top of the container's rootfs as containerd mounted it on the host: a
 * process can chroot into a volume, and a device node made there would land on the host's disk (rootProblem
 * says so). Everything is read through /proc/<pid> and then the process is checked to be still running, so it
 * was read from that process and no later one with its PID. Close it when done.
 */
export class ContainerHandle {
  #closed = false

  private constructor(
    readonly containerId: string,
    readonly root: RootDir,
    readonly control: DeviceControl,
    readonly process: PinnedProcess,
    /** The container's rootfs and the verdict on `root` (kept for the next handle of the container). */
    readonly rootVerdict: RootVerdict,
    /** Its process and device cgroup as checked (kept for the next handle of the same process). */
    readonly checked: CheckedProcess | undefined,
  ) {}

  /** Why `root` is not the container's rootfs, so that no device node may be made beneath it; undefined when it is. */
  get rootProblem(): string | undefined {
    return this.rootVerdict.judged.problem
  }

  get pid(): number {
    return this.process.pid
  }

  /** Opens the handle of `container`, whose init process containerd listed as `pid`; ContainerGoneError when that is no longer so. */
  static async open(container: RuntimeContainer, pid: number, options: ContainerHandleOptions = {}): Promise<ContainerHandle> {
    let pinned: PinnedProcess
    try {
      pinned = PinnedProcess.open(pid, {pidfd: options.pidfd})
    } catch (error) {
      if (error instanceof ProcessGoneError) throw new ContainerGoneError(container.id, pid, 'does not exist any more', {cause: error})
      throw error
    }
    let root: RootDir | undefined
    try {
      const cgroupsPath = container.spec?.linux?.cgroupsPath
      const cgroup = cgroupsPath === undefined || cgroupsPath === '' ? undefined : cgroupOfSpec(cgroupsPath)
      // Read after the pin: the start time is the pinned process's, or the check below finds it gone.
      const startTime = processStat(pid)?.startTime
      const {checked} = options
      const control = checked !== undefined && startTime === checked.startTime ? checked.control : await deviceControlOf(pid, {...options, container: {cgroup, id: container.id}})
      root = openRoot(`/proc/${pid}/root`, {openat2: options.openat2})
      root.devVerdict = options.devVerdict
      // The fd is checked, not the path: what the process does with its root later does not move the fd.
      const rootVerdict = judgeRoot(container.id, pid, root.fd, options.rootVerdict)
      if (!pinned.isRunning()) throw new ContainerGoneError(container.id, pid, 'exited while its cgroup and root were looked up')
      return new ContainerHandle(container.id, root, control, pinned, rootVerdict, startTime === undefined ? undefined : {control, startTime})
    } catch (error) {
      if (root !== undefined) closeRoot(root)
      const running = pinned.isRunning()
      pinned.close()
      if (error instanceof ContainerGoneError) throw error
      // Its /proc entries vanish with it: whatever failed, a process that is gone is the reason.
      if (!running) throw new ContainerGoneError(container.id, pid, 'exited while its cgroup and root were looked up', {cause: error})
      if (error instanceof CgroupMismatchError) throw new ContainerGoneError(container.id, pid, `is not the container's (${error.message})`, {cause: error})
      throw error
    }
  }

  /** Whether the process the handle pinned still runs (false once it exited, whatever now has its PID). */
  isRunning(): boolean {
    return this.process.isRunning()
  }

  /** After writes: ContainerGoneError unless the pinned process still runs, so that they are known to have reached its root and cgroup. */
  assertRunning(): void {
    if (!this.isRunning()) throw new ContainerGoneError(this.containerId, this.pid, 'exited while its devices were being changed')
  }

  /** Idempotent. */
  close(): void {
    if (this.#closed) return
    this.#closed = true
    closeRoot(this.root)
    this.process.close()
  }
}
