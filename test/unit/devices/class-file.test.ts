import {expect} from 'chai'
import {fileURLToPath} from 'node:url'

import {loadClassFiles, parseClassFile} from '../../../src/lib/devices/class-file.js'
import {ConfigError, ExitCode} from '../../../src/lib/errors.js'
import {rejection} from '../../support/thrown.js'

const dir = fileURLToPath(new URL('../../fixtures/classes/', import.meta.url))
const fixture = (name: string): string => `${dir}${name}`

async function configErrorFrom(paths: string[]): Promise<ConfigError> {
  const error = await rejection(loadClassFiles(paths), ConfigError)
  expect(error.exitCode).to.equal(ExitCode.usage)
  expect(error.message, 'one line').to.not.contain('\n')
  return error
}

describe('loadClassFiles', () => {
  it('reads a multi-document YAML file, skipping empty documents and applying defaults', async () => {
    const classes = await loadClassFiles([fixture('good.yaml')])
    expect(classes.map((c) => c.metadata.name)).to.deep.equal(['usb-serial', 'keyboards', 'loop'])
    expect(classes[0].spec).to.deep.equal({
      allocation: 'Class',
      capacity: 2,
      match: [{attributes: {idVendor: '0403'}, devName: 'ttyUSB*', properties: {ID_VENDOR_ID: '0403'}, subsystem: 'tty'}],
      permissions: 'rw',
    })
    expect(classes[1].spec).to.deep.include({allocation: 'Device', capacity: 1, permissions: 'rw'})
    expect(classes[1].spec.nodeSelector).to.deep.equal({
      matchExpressions: [{key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64']}],
      matchLabels: {usb: 'true'},
    })
    expect(classes[2].spec).to.deep.include({allocation: 'Class', capacity: 1, permissions: 'rwm'})
  })

  it('reads a JSON file (tab-indented JSON is valid YAML too)', async () => {
    const classes = await loadClassFiles([fixture('good.json')])
    expect(classes).to.deep.equal([
      {
        apiVersion: 'devices.nfdctl.io/v1alpha1',
        kind: 'DeviceClass',
        metadata: {name: 'gpio'},
        spec: {allocation: 'Device', capacity: 1, match: [{devName: 'gpiochip*', subsystem: 'gpio'}], permissions: 'r'},
      },
    ])
  })

  it('reads a kind: List, as kubectl prints it, keeping generation and uid and ignoring status', async () => {
    const classes = await loadClassFiles([fixture('list.yaml')])
    expect(classes.map((c) => c.metadata)).to.deep.equal([{generation: 3, name: 'usb-serial', uid: '6c3d6a52-0000-4000-8000-000000000001'}, {name: 'video'}])
  })

  it('reads a DeviceClassList whose items leave out apiVersion and kind, as the API answers', async () => {
    const classes = await loadClassFiles([fixture('device-class-list.json')])
    expect(classes.map((c) => [c.apiVersion, c.kind, c.metadata.name])).to.deep.equal([
      ['devices.nfdctl.io/v1alpha1', 'DeviceClass', 'fuse'],
      ['devices.nfdctl.io/v1alpha1', 'DeviceClass', 'tun'],
    ])
  })

  it('reads several files in order, and a file of empty documents adds nothing', async () => {
    const classes = await loadClassFiles([fixture('good.json'), fixture('empty.yaml'), fixture('good.yaml')])
    expect(classes.map((c) => c.metadata.name)).to.deep.equal(['gpio', 'usb-serial', 'keyboards', 'loop'])
    expect(await loadClassFiles([])).to.deep.equal([])
  })

  describe('one ConfigError (exit 2) on one line naming file, document, field and problem', () => {
    const cases: Array<[title: string, files: string[], message: string]> = [
      ['a wrong permission in document 2', ['bad-permissions.yaml'], '{bad-permissions.yaml}: document 2 (usb-serial): spec.permissions: must be letters from r, w, m, each once (got "rwx")'],
      [
        'several mistakes in one document, separated by "; "',
        ['several-mistakes.yaml'],
        '{several-mistakes.yaml}: document 1 (usb-serial): '
          + 'spec.match[0].devname: unknown field; a match rule takes subsystem, devName, properties, attributes (did you mean devName?); '
          + 'spec.match[1].properties.ID_VENDOR_ID: must be a non-empty glob string; quote it in YAML, such as "0403" (got the number 403); '
          + 'spec.permissions: must be letters from r, w, m, each once (got "rwx"); '
          + 'spec.capacity: capacity applies only to allocation Class; remove it (each device is one unit) or set allocation: Class',
      ],
      [
        'a YAML syntax error, with its line and column',
        ['syntax-error.yaml'],
        '{syntax-error.yaml}: document 2: line 12, column 3: not valid YAML: Flow sequence in block collection must be sufficiently indented and end with a ]',
      ],
      [
        'a Kubernetes DRA DeviceClass (resource.k8s.io)',
        ['dra-class.yaml'],
        '{dra-class.yaml}: document 1 (gpu.example.com): '
          + 'apiVersion: must be devices.nfdctl.io/v1alpha1 (got "resource.k8s.io/v1"): resource.k8s.io is the unrelated Kubernetes DRA DeviceClass; nfdctl reads DeviceClass (devices.nfdctl.io); '
          + 'spec.selectors: unknown field; spec takes nodeSelector, match, permissions, allocation, identity, capacity, annotationAccess, unplugged, hostCritical; '
          + 'spec.match: required: a list of rules, at least one (a device is in the class when any rule matches)',
      ],
      [
        'a duplicate name across files, naming both places',
        ['good.yaml', 'duplicate.yaml'],
        '{duplicate.yaml}: document 1 (usb-serial): metadata.name: "usb-serial" is also the name of {good.yaml}: document 1 (usb-serial); give each DeviceClass (devices.nfdctl.io) its own name',
      ],
      [
        'a duplicate name within one file (documents counted from 1, empty ones included)',
        ['duplicate-in-file.yaml'],
        '{duplicate-in-file.yaml}: document 3 (webcam): metadata.name: "webcam" is also the name of {duplicate-in-file.yaml}: document 1 (webcam); give each DeviceClass (devices.nfdctl.io) its own name',
      ],
      [
        'a bad List item and a DeviceClassList without items',
        ['bad-list.yaml'],
        '{bad-list.yaml}: document 1, item 2 (list-bad): spec.match: must have at least one rule, such as {subsystem: tty, devName: "ttyUSB*"}; '
          + '{bad-list.yaml}: document 2: items: a DeviceClassList needs items, a list of DeviceClass (devices.nfdctl.io) objects',
      ],
      ['a missing file', ['missing.yaml'], '{missing.yaml}: cannot read the class file: no such file; check the path'],
      [
        'problems in several files, all in the one message',
        ['missing.yaml', 'good.yaml', 'bad-permissions.yaml'],
        '{missing.yaml}: cannot read the class file: no such file; check the path; '
          + '{bad-permissions.yaml}: document 2 (usb-serial): spec.permissions: must be letters from r, w, m, each once (got "rwx")',
      ],
    ]
    for (const [title, files, message] of cases) {
      it(title, async () => {
        const error = await configErrorFrom(files.map(fixture))
        expect(error.message).to.equal(message.replaceAll(/\{([^}]+\.(?:yaml|json))\}/g, (_, name: string) => fixture(name)))
      })
    }

    it('a directory instead of a file', async () => {
      const error = await configErrorFrom([dir])
      expect(error.message).to.equal(`${dir}: cannot read the class file: it is a directory; name the files in it`)
      expect(error.cause).to.have.property('code', 'EISDIR')
    })
  })
})

describe('parseClassFile', () => {
  it('names the line of a duplicate key', () => {
    const text = 'apiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nkind: DeviceClass\n'
    expect(parseClassFile('c.yaml', text).problems).to.deep.equal(['c.yaml: document 1: line 3, column 1: not valid YAML: Map keys must be unique'])
  })

  it('reports an alias to an anchor that was never set', () => {
    const {problems} = parseClassFile('c.yaml', 'apiVersion: *version\n')
    expect(problems).to.have.length(1)
    expect(problems[0]).to.match(/^c\.yaml: document 1: not valid YAML: Unresolved alias .*: version$/)
  })

  it('reports a document that is not a mapping at the document itself', () => {
    expect(parseClassFile('c.yaml', '- usb-serial\n').problems).to.deep.equal([
      'c.yaml: document 1: must be a DeviceClass (devices.nfdctl.io/v1alpha1) mapping with apiVersion, kind, metadata and spec (got a list)',
    ])
  })

  it('keeps an odd name on one line in the label', () => {
    const text = JSON.stringify({apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'a\nb'}, spec: {match: [{subsystem: 'tty'}]}})
    const [problem] = parseClassFile('c.json', text).problems
    expect(problem).to.match(/^c\.json: document 1 \("a\\nb"\): metadata\.name: must be a DNS-1123 subdomain/)
    expect(problem).to.not.contain('\n')
  })

  it('returns each class with where it came from', () => {
    const text = '---\n---\napiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nmetadata: {name: tty}\nspec: {match: [{subsystem: tty}]}\n'
    const {classes, problems} = parseClassFile('c.yaml', text)
    expect(problems).to.deep.equal([])
    expect(classes.map((c) => c.where)).to.deep.equal(['c.yaml: document 2 (tty)'])
  })
})
