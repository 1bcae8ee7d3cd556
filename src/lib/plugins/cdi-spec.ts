import {mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import type {Device} from '../devices/types.js'
import {writeFileAtomic} from '../sys/atomic-write.js'
import {resourceDomain} from './class-allocation.js'

/** hostPath on device nodes needs CDI 0.5.0; nothing newer is used, so older runtimes read the files too. */
export const cdiVersion = '0.5.0'

export interface CdiSpec {
  cdiVersion: string
  kind: string
  devices: Array<{name: string; containerEdits: {deviceNodes: CdiDeviceNode[]}}>
}

interface CdiDeviceNode {
  path: string
  hostPath: string
  type: 'b' | 'c'
  major: number
  minor: number
  permissions: string
}

/** The CDI kind of a class, `devices.nfdctl.io/<class>`: a container asks for `devices.nfdctl.io/<class>=<id>`. */
const cdiKindOf = (className: string): string => `${resourceDomain}/${className}`

/** The spec file of a class in the CDI directory; one file per class, so that classes never overwrite each other. */
export const cdiFileOf = (cdiDir: string, className: string): string => join(cdiDir, `${resourceDomain}-${className}.json`)

/** A class's CDI spec: one CDI device per device of the class, named by its stable ID. */
export function cdiSpecOf(className: string, devices: ReadonlyArray<readonly [string, Device]>, permissions: string): CdiSpec {
  return {
    cdiVersion,
    devices: devices.map(([id, d]) => ({
      containerEdits: {deviceNodes: [{hostPath: d.devNode, major: d.major, minor: d.minor, path: d.devNode, permissions, type: d.type === 'block' ? 'b' : 'c'}]},
      name: id,
    })),
    kind: cdiKindOf(className),
  }
}

/**
 * Writes the spec atomically, so a runtime reading the directory never sees half a file. A spec without
 * devices is invalid per CDI: the file is removed instead.
 */
export async function writeCdiSpec(cdiDir: string, spec: CdiSpec): Promise<void> {
  const file = cdiFileOf(cdiDir, spec.kind.slice(resourceDomain.length + 1))
  if (spec.devices.length === 0) {
    await rm(file, {force: true})
    return
  }
  await mkdir(cdiDir, {recursive: true})
  await writeFileAtomic(file, JSON.stringify(spec, null, 2) + '\n')
}

/** Writes each class's spec in the order asked (an older spec never lands after a newer one); a failure is reported, not thrown. */
export class CdiSpecWriter {
  readonly #writes = new Map<string, Promise<void>>()

  constructor(
    readonly cdiDir: string,
    private readonly onError: (className: string, error: unknown) => void,
  ) {}

  write(className: string, spec: CdiSpec): void {
    this.#writes.set(
      className,
      this.written(className)
        .then(() => writeCdiSpec(this.cdiDir, spec))
        .catch((error: unknown) => this.onError(className, error)),
    )
  }

  /** When the class's writes asked for so far are done. */
  written(className: string): Promise<void> {
    return this.#writes.get(className) ?? Promise.resolve()
  }
}
