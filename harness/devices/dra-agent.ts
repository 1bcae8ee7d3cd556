import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {stableDeviceId} from '../../src/lib/devices/device-identity.js'
import {toMeta, type ObjectCodec} from '../../src/lib/kube/metadata-list.js'
import type {ObjectMeta} from '../../src/lib/kube/resource.js'
import {draDeviceName} from '../../src/lib/dra/resource-slices.js'
import type {TestNode} from '../node/node.js'
import {loopDevice} from './loop-device.js'
import {busyboxImage} from '../node/images.js'

export interface DraAgentDirs {
  readonly kubeconfig: string
  /** The agent's udev database (--udev-data-dir): where a test disk's serial is recorded. */
  readonly udevDir: string
  readonly stateDir: string
  /** Where the agent writes claims' CDI specs (--cdi-dir); default the directory the node's containerd reads. */
  readonly cdiDir?: string
}

/** `devices agent` on the test node: its containerd, kubelet's PodResources and device-plugin directory, a state dir, JSON logs, `extra` last. */
export function nodeAgentArgs(node: TestNode, dirs: Pick<DraAgentDirs, 'kubeconfig' | 'stateDir'>, extra: readonly string[] = ['--metrics-port', '0']): string[] {
  return [
    'devices',
    'agent',
    '--kubeconfig',
    dirs.kubeconfig,
    '--node-name',
    node.name,
    '--containerd-address',
    node.containerd.socket,
    '--pod-resources-socket',
    node.kubelet.podResourcesSocket,
    '--plugin-dir',
    node.pluginDir,
    '--state-dir',
    dirs.stateDir,
    '--log-format',
    'json',
    ...extra,
  ]
}

/** `devices agent --dra` on the test node: its kubelet's root, its containerd's CDI directory, JSON logs. */
export function draAgentArgs(node: TestNode, dirs: DraAgentDirs): string[] {
  return nodeAgentArgs(node, dirs, ['--dra', '--kubelet-dir', node.kubelet.rootDir, '--cdi-dir', dirs.cdiDir ?? node.containerd.cdiDir, '--udev-data-dir', dirs.udevDir, '--metrics-port', '0'])
}

/**
 * Test disks are loop devices with a udev serial, so that one plugged in again under another loop number
 * is the same device (the same stable ID, the same DRA device name), as a USB disk would be.
 */
export class SerialDisks {
  constructor(
    readonly udevDir: string,
    readonly prefix: string,
  ) {}

  serialOf(disk: string): string {
    return `${this.prefix}-${disk}`
  }

  /**
   * The ID kubelet's device plugins and the agent know a disk by, whatever loop number it has: computed from
   * the device as the scanner reads it, DEVTYPE=disk included (the identity's key holds it).
   */
  stableIdOf(disk: string): string {
    return stableDeviceId({...loopDevice(0, {ID_SERIAL: this.serialOf(disk), ID_SERIAL_SHORT: this.serialOf(disk)}), devType: 'disk'})
  }

  /** The DRA device name of a disk, whatever loop number it has. */
  deviceOf(disk: string): string {
    return draDeviceName(this.stableIdOf(disk))
  }

  /** What udev would record for the disk at loop<index>; write it before the loop device appears. */
  async record(index: number, disk: string): Promise<void> {
    await writeFile(join(this.udevDir, `b7:${index}`), `E:ID_SERIAL=${this.serialOf(disk)}\nE:ID_SERIAL_SHORT=${this.serialOf(disk)}\n`)
  }
}

/** A ResourceClaimTemplate of one request `disk` of a DeviceClass (resource.k8s.io), with more request fields. */
export function claimTemplateManifest(name: string, deviceClassName: string, request: Readonly<Record<string, unknown>> = {}): object {
  return {apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: {name}, spec: {spec: {devices: {requests: [{exactly: {deviceClassName, ...request}, name: 'disk'}]}}}}
}

export interface ClaimPodOptions {
  /** The pod's claim `disk`: from this template, or this ResourceClaim (shared). */
  readonly template?: string
  readonly claim?: string
  /** A second container, `sidecar`, that does not name the claim. */
  readonly sidecar?: boolean
  /** What `main` runs; default sleep. */
  readonly command?: readonly string[]
  /** Default 1. */
  readonly terminationGracePeriodSeconds?: number
}

/** Where a test pod runs and how fast it goes: on `nodeName` (else where the scheduler puts it); grace default 1 s. */
export interface TestPodPlacement {
  readonly nodeName?: string
  readonly terminationGracePeriodSeconds?: number
}

/** A pod of busybox containers from the test image, pinned to a node when one is named. */
function busyboxPod(name: string, containers: ReadonlyArray<{name: string; command?: readonly string[]; resources?: object}>, placement: TestPodPlacement, extra: object = {}): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name},
    spec: {
      automountServiceAccountToken: false,
      containers: containers.map(({command, name: containerName, resources}) => ({
        command: command ?? ['sleep', '3600'],
        image: busyboxImage,
        imagePullPolicy: 'Never',
        name: containerName,
        ...(resources === undefined ? {} : {resources}),
      })),
      ...(placement.nodeName === undefined ? {} : {nodeSelector: {'kubernetes.io/hostname': placement.nodeName}}),
      ...extra,
      terminationGracePeriodSeconds: placement.terminationGracePeriodSeconds ?? 1,
    },
  }
}

/**
 * A busybox pod whose container `main` asks for the claim `disk`, placed by kube-scheduler (it allocates the
 * claim) on the node `nodeName`, or without one on whichever node has the devices.
 */
export function claimPodManifest(name: string, nodeName: string | undefined, options: ClaimPodOptions): object {
  const main = {command: options.command, name: 'main', resources: {claims: [{name: 'disk'}]}}
  return busyboxPod(
    name,
    [main, ...(options.sidecar ? [{name: 'sidecar'}] : [])],
    {nodeName, terminationGracePeriodSeconds: options.terminationGracePeriodSeconds},
    {
      resourceClaims: [{name: 'disk', ...(options.claim === undefined ? {resourceClaimTemplateName: options.template} : {resourceClaimName: options.claim})}],
    },
  )
}

/**
 * A busybox pod whose one container `main` runs `command` (default: sleeps), asking by limit for one device
 * of `resource` (a device plugin's, or a DRA class's extended resource).
 */
export function limitPodManifest(name: string, resource: string, options: TestPodPlacement & {command?: readonly string[]} = {}): object {
  return busyboxPod(name, [{command: options.command, name: 'main', resources: {limits: {[resource]: '1'}}}], options)
}

/** ResourceSlices as a watch delivers them, the spec as the API server has it (for an Informer over slices). */
export function sliceCodec<S extends {metadata: ObjectMeta; spec: object}>(): ObjectCodec<S> {
  return {
    listAccept: 'application/json',
    metaOf: (slice) => slice.metadata,
    toItem: (raw) => {
      const slice = raw as {metadata?: ObjectMeta; spec?: S['spec']}
      return slice.metadata === undefined || slice.spec === undefined ? undefined : ({metadata: toMeta(slice.metadata), spec: slice.spec} as S)
    },
    watchAccept: 'application/json',
  }
}
