import {expect} from 'chai'

import type {DeviceClass, ValidationIssue} from '../../../src/lib/devices/types.js'
import {validateDeviceClass} from '../../../src/lib/devices/validate-device-class.js'
import {badClasses, goodClasses} from '../../fixtures/classes/cases.js'
import {deviceClassManifest} from '../../support/device-class.js'

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
    expect(accepted(deviceClassManifest('usb-serial'))).to.deep.equal({
      apiVersion: 'devices.nfdctl.io/v1alpha1',
      kind: 'DeviceClass',
      metadata: {name: 'usb-serial'},
      spec: {allocation: 'Class', capacity: 1, match: [{subsystem: 'tty'}], permissions: 'rw'},
    })
  })

  it('treats a field written with no value (null) as absent, so it gets its default', () => {
    expect(accepted(deviceClassManifest('usb-serial', {allocation: null, capacity: null, nodeSelector: null, permissions: null})).spec).to.deep.equal({
      allocation: 'Class',
      capacity: 1,
      match: [{subsystem: 'tty'}],
      permissions: 'rw',
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
        match: [{attributes: {idVendor: '0403'}, devName: 'ttyUSB*', properties: {ID_VENDOR_ID: '0403'}, subsystem: 'tty'}, {devName: 'ttyACM[0-9]'}],
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
    const input = deviceClassManifest('usb-serial', {match: [{properties: {A: '1'}}], nodeSelector: {matchLabels: {a: 'b'}}})
    const spec = accepted(input).spec
    expect(spec.match[0]).to.not.equal((input.spec as {match: unknown[]}).match[0])
    expect(spec.nodeSelector?.matchLabels).to.not.equal((input.spec as {nodeSelector: {matchLabels: unknown}}).nodeSelector.matchLabels)
  })

  describe('accepts the good classes of the shared fixture', () => {
    for (const {title, value} of goodClasses) {
      it(title, () => {
        accepted(value)
      })
    }
  })

  describe('reports each mistake of the shared fixture at its path, on one line', () => {
    for (const {refused, title, value} of badClasses) {
      it(`${title}: ${refused.path || '(the document)'}`, () => {
        const issues = issuesOf(value)
        const atPath = issues.filter((i) => i.path === refused.path)
        expect(atPath, `issues: ${JSON.stringify(issues)}`).to.not.be.empty
        expect(atPath.map((i) => i.message).join('\n')).to.contain(refused.says)
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
    expect(issuesOf(deviceClassManifest('usb-serial', {}, {metadata: {}, spec: undefined})).map((i) => i.path)).to.deep.equal(['metadata.name', 'spec'])
  })
})
