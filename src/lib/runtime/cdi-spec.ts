import {mkdir, rm} from 'node:fs/promises'
import {dirname} from 'node:path'

import {writeFileAtomic} from '../sys/atomic-write.js'

/**
 * Container Device Interface specs, as both the device plugins (one spec per class) and the DRA driver (one
 * spec per claim) write them: the spec type, the device node edit, and the file written so that a runtime
 * reading the directory never sees half of it.
 */

/** hostPath on device nodes needs CDI 0.5.0; nothing newer is used, so older runtimes read the files too. */
export const cdiVersion = '0.5.0'

export interface CdiDeviceNode {
  path: string
  hostPath: string
  type: 'b' | 'c'
  major: number
  minor: number
  permissions: string
}

export interface CdiDevice {
  name: string
  containerEdits: {deviceNodes: CdiDeviceNode[]}
}

export interface CdiSpec {
  cdiVersion: string
  kind: string
  devices: CdiDevice[]
}

/** What a device node edit needs of a device. */
export interface DeviceNode {
  readonly devNode: string
  readonly type: 'block' | 'char'
  readonly major: number
  readonly minor: number
}

/** A device node edit: the host's node of the device, at `path` in the container (its own path unless told). */
export function cdiDeviceNode(device: DeviceNode, permissions: string, path = device.devNode): CdiDeviceNode {
  return {hostPath: device.devNode, major: device.major, minor: device.minor, path, permissions, type: device.type === 'block' ? 'b' : 'c'}
}

/**
 * Writes a spec file atomically (temporary file, rename). A spec without devices is invalid per CDI: the
 * file is removed instead.
 */
export async function writeCdiSpecFile(file: string, spec: CdiSpec): Promise<void> {
  if (spec.devices.length === 0) {
    await rm(file, {force: true})
    return
  }
  await mkdir(dirname(file), {recursive: true})
  await writeFileAtomic(file, `${JSON.stringify(spec, null, 2)}\n`)
}

/** Writes each key's spec file in the order asked (an older spec never lands after a newer one); a failure is reported, not thrown. */
export class CdiSpecWriter {
  readonly #writes = new Map<string, Promise<void>>()

  constructor(private readonly onError: (key: string, error: unknown) => void) {}

  write(key: string, file: string, spec: CdiSpec): void {
    this.#writes.set(
      key,
      this.written(key)
        .then(() => writeCdiSpecFile(file, spec))
        .catch((error: unknown) => this.onError(key, error)),
    )
  }

  /** When the key's writes asked for so far are done. */
  written(key: string): Promise<void> {
    return this.#writes.get(key) ?? Promise.resolve()
  }
}
