import {expect} from 'chai'

import type {DeviceClass, ValidationIssue} from '../../../src/lib/devices/types.js'
import {validateDeviceClass} from '../../../src/lib/devices/validate-device-class.js'

type Json = Record<string, unknown>

/** A valid class; each case below changes one thing. */
function base(spec: Json = {}, rest: Json = {}): Json {
  return {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'usb-serial'}, spec: {match: [{subsystem: 'tty'}], ...spec}, ...rest}
}

function issuesOf(value: unknown): ValidationIssue[] {
  const result = validateDeviceClass(value)
  if (result.ok) expect.fail(`expected issues, but the class was accepted: ${JSON.stringify(result.deviceClass)}`)
  return result.issues
}

function accepted(value: unknown): DeviceClass {
  const result = validateDeviceClass(value)
  if (!result.ok) expect.fail(`expected the class to be accepted: ${JSON.stringify(result.issues)}`)
  return result.deviceClass
}

describe('validateDeviceClass', () => {
  it('applies the defaults: permissions rw, allocation Class, capacity 1', () => {
    expect(accepted(base())).to.deep.equal({
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {name: 'usb-serial'},
      spec: {allocation: 'Class', capacity: 1, match: [{subsystem: 'tty'}], permissions: 'rw'},
    })
  })

  it('treats a field written with no value (null) as absent, so it gets its default', () => {
    expect(accepted(base({allocation: null, capacity: null, nodeSelector: null, permissions: null})).spec).to.deep.equal({
      allocation: 'Class', capacity: 1, match: [{subsystem: 'tty'}], permissions: 'rw',
    })
  })

  it('accepts the full example of the design, ignoring status and unknown metadata', () => {
    const full = {
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {generation: 3, labels: {team: 'edge'}, name: 'usb-serial', resourceVersion: '42', uid: 'a-b-c'},
      spec: {
        allocation: 'Class',
        capacity: 10,
        match: [
          {attributes: {idVendor: '0403'}, devName: 'ttyUSB*', properties: {ID_VENDOR_ID: '0403'}, subsystem: 'tty'},
          {devName: 'ttyACM[0-9]'},
        ],
        nodeSelector: {
          matchExpressions: [
            {key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64']},
            {key: 'example.com/no-usb', operator: 'DoesNotExist'},
            {key: 'zone', operator: 'Exists', values: []},
          ],
          matchLabels: {'node-role.kubernetes.io/edge': '', 'usb': 'true'},
        },
        permissions: 'rwm',
      },
      status: {conditions: 'not ours to check', nodes: [{node: 'worker-1'}]},
    }
    expect(accepted(full)).to.deep.equal({
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {generation: 3, name: 'usb-serial', uid: 'a-b-c'},
      spec: {
        allocation: 'Class',
        capacity: 10,
        match: full.spec.match,
        nodeSelector: {
          matchExpressions: [
            {key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64']},
            {key: 'example.com/no-usb', operator: 'DoesNotExist'},
            {key: 'zone', operator: 'Exists', values: []},
          ],
          matchLabels: {'node-role.kubernetes.io/edge': '', 'usb': 'true'},
        },
        permissions: 'rwm',
      },
    })
  })

  it('returns copies, not the objects it was given', () => {
    const input = base({match: [{properties: {A: '1'}}], nodeSelector: {matchLabels: {a: 'b'}}})
    const spec = accepted(input).spec
    expect(spec.match[0]).to.not.equal((input.spec as {match: unknown[]}).match[0])
    expect(spec.nodeSelector?.matchLabels).to.not.equal((input.spec as {nodeSelector: {matchLabels: unknown}}).nodeSelector.matchLabels)
  })

  describe('accepts', () => {
    const cases: Array<[title: string, value: Json]> = [
      ['every order of r, w, m', base({permissions: 'mwr'})],
      ['a single permission letter', base({permissions: 'r'})],
      ['allocation Device without capacity', base({allocation: 'Device'})],
      ['a 63-character name', base({}, {metadata: {name: 'a'.repeat(63)}})],
      ['a dotted name', base({}, {metadata: {name: 'usb.serial-0'}})],
      ['a rule with only properties', base({match: [{properties: {ID_MODEL: 'FT232*'}}]})],
      ['a rule with only attributes', base({match: [{attributes: {'power/control': 'auto'}}]})],
      ['a devName glob with a path', base({match: [{devName: 'input/event*'}]})],
      ['a devName glob with braces and classes', base({match: [{devName: 'tty{USB,ACM}[0-9]'}]})],
      ['an escaped bracket in a glob', base({match: [{devName: 'odd\\[name'}]})],
      ['an empty nodeSelector (every node)', base({nodeSelector: {}})],
      ['an empty label value', base({nodeSelector: {matchLabels: {'example.com/gpu': ''}}})],
      ['a 253-character key prefix', base({nodeSelector: {matchLabels: {[`${'a'.repeat(253)}/n`]: 'v'}}})],
      ['NotIn with values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'NotIn', values: ['b']}]}})],
    ]
    for (const [title, value] of cases) {
      it(title, () => {
        accepted(value)
      })
    }
  })

  describe('reports each mistake at its path', () => {
    const long = 'a'.repeat(64)
    const cases: Array<[title: string, value: unknown, path: string, fragment: string]> = [
      ['not a mapping', 'usb-serial', '', 'must be a DeviceClass (devices.nfdctl.io/v1alpha1) mapping'],
      ['a list instead of a mapping', [], '', '(got a list)'],
      ['no apiVersion', base({}, {apiVersion: undefined}), 'apiVersion', 'required; set apiVersion: devices.nfdctl.io/v1alpha1'],
      ['another version', base({}, {apiVersion: 'devices.nfdctl.io/v1'}), 'apiVersion', 'must be devices.nfdctl.io/v1alpha1 (got "devices.nfdctl.io/v1")'],
      ['the DRA DeviceClass', base({}, {apiVersion: 'resource.k8s.io/v1'}), 'apiVersion', 'resource.k8s.io is the unrelated Kubernetes DRA DeviceClass; nfdctl reads DeviceClass (devices.nfdctl.io)'],
      ['no kind', base({}, {kind: undefined}), 'kind', 'required; set kind: DeviceClass'],
      ['another kind', base({}, {kind: 'ConfigMap'}), 'kind', 'must be DeviceClass (got "ConfigMap")'],
      ['no metadata', base({}, {metadata: undefined}), 'metadata', 'required: a mapping with the class name'],
      ['metadata not a mapping', base({}, {metadata: 'usb'}), 'metadata', 'must be a mapping with the class name (got "usb")'],
      ['no name', base({}, {metadata: {}}), 'metadata.name', 'required; it names the kubelet resource devices.nfdctl.io/<name>'],
      ['a numeric name', base({}, {metadata: {name: 7}}), 'metadata.name', 'must be a string (got the number 7)'],
      ['an upper-case name', base({}, {metadata: {name: 'USB'}}), 'metadata.name', `must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'`],
      ['a name ending in -', base({}, {metadata: {name: 'usb-'}}), 'metadata.name', 'DNS-1123 subdomain'],
      ['a name with an empty dot part', base({}, {metadata: {name: 'a..b'}}), 'metadata.name', 'DNS-1123 subdomain'],
      ['a 64-character name', base({}, {metadata: {name: long}}), 'metadata.name', 'must be at most 63 characters, as it becomes the kubelet resource devices.nfdctl.io/<name> (got 64)'],
      ['no spec', base({}, {spec: undefined}), 'spec', 'required: a mapping with match'],
      ['spec a list', base({}, {spec: []}), 'spec', '(got a list)'],
      ['an unknown spec field', base({devices: 'tty*'}), 'spec.devices', 'unknown field; spec takes nodeSelector, match, permissions, allocation, capacity'],
      ['a mis-cased spec field', base({Permissions: 'r'}), 'spec.Permissions', '(did you mean permissions?)'],
      ['no match', base({match: undefined}), 'spec.match', 'required: a list of rules, at least one'],
      ['match a mapping', base({match: {subsystem: 'tty'}}), 'spec.match', 'must be a list of rules (got a mapping)'],
      ['no rules', base({match: []}), 'spec.match', 'must have at least one rule'],
      ['a rule that is a string', base({match: ['tty']}), 'spec.match[0]', 'must be a mapping with at least one of subsystem, devName, properties, attributes (got "tty")'],
      ['an empty rule', base({match: [{subsystem: 'tty'}, {}]}), 'spec.match[1]', 'needs at least one of subsystem, devName, properties, attributes'],
      ['an unknown rule field', base({match: [{subsystem: 'tty', vendor: '0403'}]}), 'spec.match[0].vendor', 'unknown field; a match rule takes subsystem, devName, properties, attributes'],
      ['a mis-cased rule field', base({match: [{devname: 'tty*'}]}), 'spec.match[0].devname', '(did you mean devName?)'],
      ['an empty subsystem', base({match: [{subsystem: ''}]}), 'spec.match[0].subsystem', 'must be a non-empty string such as "tty" (got "")'],
      ['a numeric subsystem', base({match: [{subsystem: 4}]}), 'spec.match[0].subsystem', '(got the number 4)'],
      ['an empty devName', base({match: [{devName: ''}]}), 'spec.match[0].devName', 'must be a non-empty glob string, such as "ttyUSB*" (got "")'],
      ['an unclosed [ in devName', base({match: [{devName: 'ttyUSB['}]}), 'spec.match[0].devName', 'is not a valid glob (got "ttyUSB["): "[" is never closed; close it with "]" or write \\[ for a literal "["'],
      ['a ] without [ in devName', base({match: [{devName: 'tty]'}]}), 'spec.match[0].devName', '"]" has no opening "["; write \\] for a literal "]"'],
      ['an unclosed { in devName', base({match: [{devName: 'tty{USB,ACM'}]}), 'spec.match[0].devName', '"{" is never closed'],
      ['a trailing backslash in devName', base({match: [{devName: 'tty\\'}]}), 'spec.match[0].devName', 'is not a valid glob (got "tty\\\\"): it does not compile'],
      ['properties a list', base({match: [{properties: ['ID_VENDOR_ID=0403']}]}), 'spec.match[0].properties', 'must be a mapping of property names to globs, such as {ID_VENDOR_ID: "0403"} (got a list)'],
      ['empty properties', base({match: [{properties: {}}]}), 'spec.match[0].properties', 'must name at least one property'],
      ['an unquoted vendor id (YAML read a number)', base({match: [{subsystem: 'tty'}, {properties: {ID_VENDOR_ID: 403}}]}), 'spec.match[1].properties.ID_VENDOR_ID', 'must be a non-empty glob string; quote it in YAML, such as "0403" (got the number 403)'],
      ['an empty property value', base({match: [{properties: {ID_MODEL: ''}}]}), 'spec.match[0].properties.ID_MODEL', 'must be a non-empty glob string'],
      ['an empty property name', base({match: [{properties: {'': 'x'}}]}), 'spec.match[0].properties[""]', 'property names must not be empty'],
      ['a bad glob in an attribute', base({match: [{attributes: {'power/control': 'a[b'}}]}), 'spec.match[0].attributes["power/control"]', '"[" is never closed'],
      ['empty attributes', base({match: [{attributes: {}}]}), 'spec.match[0].attributes', 'must name at least one attribute'],
      ['permissions with x', base({permissions: 'rwx'}), 'spec.permissions', 'must be letters from r, w, m, each once (got "rwx")'],
      ['a repeated permission', base({permissions: 'rr'}), 'spec.permissions', 'each once (got "rr")'],
      ['empty permissions', base({permissions: ''}), 'spec.permissions', 'each once (got "")'],
      ['upper-case permissions', base({permissions: 'RW'}), 'spec.permissions', 'each once (got "RW")'],
      ['permissions a list', base({permissions: ['r', 'w']}), 'spec.permissions', '(got a list)'],
      ['allocation in lower case', base({allocation: 'class'}), 'spec.allocation', 'must be Class or Device (got "class")'],
      ['capacity 0', base({capacity: 0}), 'spec.capacity', 'must be a whole number >= 1 (got the number 0)'],
      ['a fractional capacity', base({capacity: 1.5}), 'spec.capacity', 'must be a whole number >= 1 (got the number 1.5)'],
      ['capacity as a string', base({capacity: '2'}), 'spec.capacity', '(got "2")'],
      ['capacity with allocation Device', base({allocation: 'Device', capacity: 2}), 'spec.capacity', 'capacity applies only to allocation Class'],
      ['capacity 1 with allocation Device', base({allocation: 'Device', capacity: 1}), 'spec.capacity', 'capacity applies only to allocation Class'],
      ['nodeSelector a string', base({nodeSelector: 'edge'}), 'spec.nodeSelector', 'must be a LabelSelector mapping with matchLabels and/or matchExpressions (got "edge")'],
      ['an unknown nodeSelector field', base({nodeSelector: {labels: {a: 'b'}}}), 'spec.nodeSelector.labels', 'unknown field; a LabelSelector takes matchLabels, matchExpressions'],
      ['matchLabels a list', base({nodeSelector: {matchLabels: ['a=b']}}), 'spec.nodeSelector.matchLabels', 'must be a mapping of label keys to values (got a list)'],
      ['a label key with a space', base({nodeSelector: {matchLabels: {'bad key': 'x'}}}), 'spec.nodeSelector.matchLabels["bad key"]', 'must be a label key: the name must be 1 to 63 letters'],
      ['a label key with two /', base({nodeSelector: {matchLabels: {'a/b/c': 'x'}}}), 'spec.nodeSelector.matchLabels["a/b/c"]', 'with at most one "/"'],
      ['an upper-case key prefix', base({nodeSelector: {matchLabels: {'Example.com/a': 'x'}}}), 'spec.nodeSelector.matchLabels["Example.com/a"]', 'the prefix before "/" must be a DNS subdomain'],
      ['an empty key prefix', base({nodeSelector: {matchLabels: {'/a': 'x'}}}), 'spec.nodeSelector.matchLabels["/a"]', 'the prefix before "/"'],
      ['a 64-character key name', base({nodeSelector: {matchLabels: {[long]: 'x'}}}), `spec.nodeSelector.matchLabels.${long}`, 'the name must be 1 to 63'],
      ['an unquoted boolean label value', base({nodeSelector: {matchLabels: {usb: true}}}), 'spec.nodeSelector.matchLabels.usb', 'must be a string label value; quote it in YAML, such as "true" (got the boolean true)'],
      ['a label value starting with -', base({nodeSelector: {matchLabels: {usb: '-yes'}}}), 'spec.nodeSelector.matchLabels.usb', 'must be a label value: empty, or at most 63 letters'],
      ['a 64-character label value', base({nodeSelector: {matchLabels: {usb: long}}}), 'spec.nodeSelector.matchLabels.usb', 'must be a label value'],
      ['matchExpressions a mapping', base({nodeSelector: {matchExpressions: {key: 'a'}}}), 'spec.nodeSelector.matchExpressions', 'must be a list of {key, operator, values} (got a mapping)'],
      ['an expression that is a string', base({nodeSelector: {matchExpressions: ['a in (b)']}}), 'spec.nodeSelector.matchExpressions[0]', 'must be a mapping {key, operator, values}'],
      ['an expression without key', base({nodeSelector: {matchExpressions: [{operator: 'Exists'}]}}), 'spec.nodeSelector.matchExpressions[0].key', 'required: the label key to test'],
      ['an expression with a bad key', base({nodeSelector: {matchExpressions: [{key: 'a b', operator: 'Exists'}]}}), 'spec.nodeSelector.matchExpressions[0].key', 'must be a label key'],
      ['an expression without operator', base({nodeSelector: {matchExpressions: [{key: 'a'}]}}), 'spec.nodeSelector.matchExpressions[0].operator', 'required: one of In, NotIn, Exists, DoesNotExist'],
      ['an unknown operator', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'Equals', values: ['b']}]}}), 'spec.nodeSelector.matchExpressions[0].operator', 'must be one of In, NotIn, Exists, DoesNotExist (got "Equals")'],
      ['an unknown expression field', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'Exists', value: 'b'}]}}), 'spec.nodeSelector.matchExpressions[0].value', 'unknown field; a selector expression takes key, operator, values (did you mean values?)'],
      ['In without values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'In'}]}}), 'spec.nodeSelector.matchExpressions[0].values', 'operator In needs at least one value'],
      ['NotIn with empty values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'NotIn', values: []}]}}), 'spec.nodeSelector.matchExpressions[0].values', 'operator NotIn needs at least one value'],
      ['Exists with values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'Exists', values: ['b']}]}}), 'spec.nodeSelector.matchExpressions[0].values', 'operator Exists takes no values; remove values'],
      ['DoesNotExist with values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'DoesNotExist', values: ['b']}]}}), 'spec.nodeSelector.matchExpressions[0].values', 'operator DoesNotExist takes no values'],
      ['values a string', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'In', values: 'b'}]}}), 'spec.nodeSelector.matchExpressions[0].values', 'must be a list of label values (got "b")'],
      ['a numeric value in values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'In', values: ['b', 2]}]}}), 'spec.nodeSelector.matchExpressions[0].values[1]', 'must be a string label value'],
      ['a bad label value in values', base({nodeSelector: {matchExpressions: [{key: 'a', operator: 'In', values: ['b c']}]}}), 'spec.nodeSelector.matchExpressions[0].values[0]', 'must be a label value'],
    ]
    for (const [title, value, path, fragment] of cases) {
      it(`${title}: ${path || '(the document)'}`, () => {
        const issues = issuesOf(value)
        const atPath = issues.filter((i) => i.path === path)
        expect(atPath, `issues: ${JSON.stringify(issues)}`).to.not.be.empty
        expect(atPath.map((i) => i.message).join('\n')).to.contain(fragment)
        for (const issue of issues) expect(issue.message, 'one line').to.not.contain('\n')
      })
    }
  })

  it('reports every issue at once, in document order', () => {
    const issues = issuesOf({
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: {name: 'USB'},
      spec: {
        allocation: 'Device',
        capacity: 0,
        match: [{subsystem: 'tty'}, {properties: {ID_VENDOR_ID: 403}, vendor: 'x'}],
        permissions: 'rwx',
        extra: true,
      },
    })
    expect(issues.map((i) => i.path)).to.deep.equal([
      'apiVersion',
      'metadata.name',
      'spec.extra',
      'spec.match[1].vendor',
      'spec.match[1].properties.ID_VENDOR_ID',
      'spec.permissions',
      'spec.capacity',
      'spec.capacity',
    ])
    expect(issues.at(-1)?.message).to.contain('capacity applies only to allocation Class')
  })

  it('checks the spec even when the name is wrong, and the name even when the spec is missing', () => {
    expect(issuesOf(base({}, {metadata: {}, spec: undefined})).map((i) => i.path)).to.deep.equal(['metadata.name', 'spec'])
  })
})
