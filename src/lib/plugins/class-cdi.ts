import {join} from 'node:path'

import {resourceDomain, resourceNameOf} from '../devices/resource-names.js'
import type {Device} from '../devices/types.js'
import {cdiDeviceNode, cdiVersion, type CdiSpec} from '../runtime/cdi-spec.js'

/**
 * The CDI kind of a class is its extended resource name, `devices.nfdctl.io/<class>`: a container asks for
 * `devices.nfdctl.io/<class>=<id>`.
 */
const cdiKindOf = resourceNameOf

/** The spec file of a class in the CDI directory; one file per class, so that classes never overwrite each other. */
export const cdiFileOf = (cdiDir: string, className: string): string => join(cdiDir, `${resourceDomain}-${className}.json`)

/** A class's CDI spec: one CDI device per device of the class, named by its stable ID. */
export function cdiSpecOf(className: string, devices: ReadonlyArray<readonly [string, Device]>, permissions: string): CdiSpec {
  return {
    cdiVersion,
    devices: devices.map(([id, d]) => ({containerEdits: {deviceNodes: [cdiDeviceNode(d, permissions)]}, name: id})),
    kind: cdiKindOf(className),
  }
}
