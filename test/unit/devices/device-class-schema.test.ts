import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'
import {parse} from 'yaml'

import {deviceClassCrd, deviceClassCrdPath, deviceClassCrdYaml} from '../../../src/lib/devices/device-class-crd.js'
import {deviceClassSchema, type SchemaNode} from '../../../src/lib/devices/device-class-schema.js'

const committed = (): Promise<string> => readFile(fileURLToPath(new URL(`../../../${deviceClassCrdPath}`, import.meta.url)), 'utf8')

/** Every node of a schema with its path, e.g. `.properties.spec.properties.match.items`. */
function nodes(node: Record<string, unknown>, path = ''): Array<[string, Record<string, unknown>]> {
  const children: Array<[string, Record<string, unknown>]> = []
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Record<string, unknown>>)) children.push([`${path}.properties.${name}`, child])
  for (const key of ['items', 'additionalProperties']) if (node[key] !== undefined) children.push([`${path}.${key}`, node[key] as Record<string, unknown>])
  return [[path, node], ...children.flatMap(([p, child]) => nodes(child, p))]
}

const openAPIV3Schema = (crd: unknown): Record<string, unknown> => (crd as {spec: {versions: Array<{schema: {openAPIV3Schema: Record<string, unknown>}}>}}).spec.versions[0].schema.openAPIV3Schema

describe('the DeviceClass schema and the CRD produced from it', () => {
  it(`${deviceClassCrdPath} is what \`npm run generate:crd\` writes, byte for byte`, async () => {
    const generated = deviceClassCrdYaml()
    expect((await committed()) === generated, `${deviceClassCrdPath} differs from src/lib/devices/device-class-schema.ts: run npm run generate:crd`).to.equal(true)
  })

  it('the file reads back as the CRD object', async () => {
    expect(parse(await committed())).to.deep.equal(JSON.parse(JSON.stringify(deviceClassCrd())))
  })

  it("leaves out what only nfdctl reads: x-nfdctl-* keys and the CEL rules' TypeScript twins", () => {
    for (const [path, node] of nodes(openAPIV3Schema(deviceClassCrd()))) {
      expect(
        Object.keys(node).filter((key) => key.startsWith('x-nfdctl-')),
        path,
      ).to.deep.equal([])
      for (const rule of (node['x-kubernetes-validations'] ?? []) as Array<Record<string, unknown>>) {
        expect(['fieldPath', 'message', 'reason', 'rule'], `${path}: ${String(rule.rule)}`).to.include.members(Object.keys(rule))
      }
    }
  })

  it('is structural, as Kubernetes requires: a type on every node, never properties beside additionalProperties', () => {
    for (const [path, node] of nodes(openAPIV3Schema(deviceClassCrd()))) {
      expect(node.type, `${path || '(root)'} has no type`).to.be.a('string')
      expect(node.properties !== undefined && node.additionalProperties !== undefined, `${path} has both properties and additionalProperties`).to.equal(false)
    }
  })

  it('keeps a TypeScript twin beside every CEL rule, and wording for every field that reports unknown fields', () => {
    for (const [path, node] of nodes(deviceClassSchema as unknown as Record<string, unknown>)) {
      const schemaNode = node as unknown as SchemaNode
      for (const rule of schemaNode['x-kubernetes-validations'] ?? []) expect(rule.check, `${path}: ${rule.rule}`).to.be.a('function')
      if (schemaNode['x-nfdctl-text']?.fieldsOf !== undefined) expect(schemaNode.properties, `${path} names unknown fields but declares none`).to.be.an('object')
    }
  })
})
