/**
 * The DeviceClass (devices.nfdctl.io) CRD as deploy/crds/deviceclasses.devices.nfdctl.io.yaml holds it,
 * produced from deviceClassSchema: `npm run generate:crd` writes it, and a unit test keeps the committed
 * file equal to it. Pure.
 */
import {Document, isScalar, visit} from 'yaml'

import {type CelRule, deviceClassSchema, type SchemaNode} from './device-class-schema.js'
import {deviceClassGroup, deviceClassVersion} from './types.js'

/** Where the CRD lives, relative to the repository root. */
export const deviceClassCrdPath = `deploy/crds/deviceclasses.${deviceClassGroup}.yaml`

const header = `# DeviceClass (${deviceClassGroup}/${deviceClassVersion}): which host devices form a class, on which nodes, and how
# containers get them. Not the Kubernetes DRA DeviceClass (resource.k8s.io), which is unrelated.
#
# GENERATED from src/lib/devices/device-class-schema.ts by \`npm run generate:crd\`; edit that file, not this one.
# validateDeviceClass checks class files and API objects against the same schema, runs a TypeScript twin of
# each CEL rule below, and adds what this CRD does not say: globs must be in nfdctl's syntax (balanced
# brackets; no extglobs, braces or POSIX classes), matched in time linear in pattern and value.
#
# capacity has NO server-side default on purpose: it applies only to allocation Class, and a default of 1
# would be written into allocation Device objects too, which the CEL rule on spec rejects. Consumers treat
# a missing capacity as 1.
`

/** The CRD object. */
export function deviceClassCrd(): Record<string, unknown> {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {name: `deviceclasses.${deviceClassGroup}`},
    spec: {
      group: deviceClassGroup,
      names: {kind: 'DeviceClass', listKind: 'DeviceClassList', plural: 'deviceclasses', singular: 'deviceclass'},
      scope: 'Cluster',
      versions: [
        {
          name: deviceClassVersion,
          served: true,
          storage: true,
          subresources: {status: {}},
          additionalPrinterColumns: [
            {name: 'Allocation', type: 'string', jsonPath: '.spec.allocation'},
            {name: 'Permissions', type: 'string', jsonPath: '.spec.permissions'},
            {name: 'Capacity', type: 'integer', description: 'Containers that may hold the class at once (allocation Class; empty means 1)', jsonPath: '.spec.capacity'},
            {name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp'},
          ],
          schema: {openAPIV3Schema: crdSchema(deviceClassSchema)},
        },
      ],
    },
  }
}

/** The CRD file's text, byte for byte. */
export function deviceClassCrdYaml(): string {
  const document = new Document(deviceClassCrd(), {aliasDuplicateObjects: false})
  // Short leaves on one line, as a person writes them: {type: string}, [Class, Device].
  visit(document, {
    Map(_, map) {
      if (map.items.length <= 4 && map.items.every((pair) => isScalar(pair.value) && String(pair.value.value).length <= 24)) map.flow = true
    },
    Seq(_, seq) {
      if (seq.items.every((item) => isScalar(item))) seq.flow = true
    },
  })
  return header + document.toString({flowCollectionPadding: false, indentSeq: false, lineWidth: 0})
}

/** The schema node as Kubernetes reads it: nfdctl's own keys and the CEL rules' TypeScript twins left out. */
function crdSchema(node: SchemaNode): Record<string, unknown> {
  const schema: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith('x-nfdctl-')) continue
    if (key === 'properties') schema[key] = Object.fromEntries(Object.entries(value as Record<string, SchemaNode>).map(([name, child]) => [name, crdSchema(child)]))
    else if (key === 'items' || key === 'additionalProperties') schema[key] = crdSchema(value as SchemaNode)
    else if (key === 'x-kubernetes-validations') schema[key] = (value as CelRule[]).map(({check: _check, ...rule}) => rule)
    else schema[key] = value
  }
  return schema
}
