import {listedClass} from './cluster-classes.js'
import {classesForNode} from './node-classes.js'
import type {DeviceClass} from './types.js'

/** A cluster class whose spec the node cannot use. */
export interface ClassProblem {
  readonly name: string
  readonly generation?: number
  readonly message: string
  /** The generation of the last valid spec, which the node keeps using; undefined: the class is not served. */
  readonly using?: number
}

/** The classes a node works with, and the ones it reports as invalid. */
export interface ClassView {
  /** Valid classes (or their last valid spec) whose nodeSelector selects the node. */
  readonly applicable: readonly DeviceClass[]
  readonly invalid: readonly ClassProblem[]
}

export interface ClassViewInput {
  /** From --class-file: already valid. */
  readonly fileClasses: readonly DeviceClass[]
  /** The cluster's DeviceClass objects as listed (no apiVersion or kind on list items). */
  readonly clusterItems: Iterable<unknown>
  /** The last valid spec of each cluster class, from earlier views. */
  readonly lastValid: ReadonlyMap<string, DeviceClass>
  readonly nodeLabels: Readonly<Record<string, string>>
}

/**
 * Pure: validates the cluster's classes and picks the node's. A class whose new spec is invalid keeps its
 * last valid one, so that a typo in an edit does not take devices away from running containers; the
 * problem is reported either way. A class that is gone from the cluster is gone (its access is withdrawn).
 */
export function classView(input: ClassViewInput): {view: ClassView; lastValid: Map<string, DeviceClass>} {
  const lastValid = new Map<string, DeviceClass>()
  const invalid: ClassProblem[] = []
  for (const item of input.clusterItems) {
    const listed = listedClass(item)
    if (listed.ok) {
      lastValid.set(listed.deviceClass.metadata.name, listed.deviceClass)
      continue
    }
    const {generation, message, name} = listed
    const previous = input.lastValid.get(name)
    if (previous !== undefined) lastValid.set(name, previous)
    invalid.push({generation, message, name, using: previous?.metadata.generation})
  }
  const {applicable} = classesForNode(input.fileClasses, lastValid.values(), input.nodeLabels)
  return {lastValid, view: {applicable, invalid: invalid.sort((a, b) => a.name.localeCompare(b.name))}}
}
