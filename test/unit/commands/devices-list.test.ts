import {expect} from 'chai'

import {nfdctl} from '../../support/run-cli.js'

const fixture = (name: string): string => `test/fixtures/classes/${name}`

// A bad class file exits 2 with one line naming the file, the document and the field; nothing is listed.
describe('devices list: bad input', function () {
  const cases: Array<[string, string[], RegExp]> = [
    [
      'several mistakes in one document',
      ['--class-file', fixture('several-mistakes.yaml')],
      /^test\/fixtures\/classes\/several-mistakes\.yaml: document 1 \(usb-serial\): spec\.match\[0\]\.devname: unknown field.*spec\.permissions: must be letters from r, w, m, each once \(got "rwx"\)/,
    ],
    ['bad permissions in the second document', ['--class-file', fixture('bad-permissions.yaml')], /^test\/fixtures\/classes\/bad-permissions\.yaml: document 2 \(usb-serial\): spec\.permissions: /],
    ['a Kubernetes DRA DeviceClass', ['--class-file', fixture('dra-class.yaml')], /apiVersion: must be devices\.nfdctl\.io\/v1alpha1 .*resource\.k8s\.io is the unrelated Kubernetes DRA DeviceClass/],
    ['a YAML syntax error', ['--class-file', fixture('syntax-error.yaml')], /^test\/fixtures\/classes\/syntax-error\.yaml: document 2: line 12, column 3: not valid YAML/],
    ['duplicate class names', ['--class-file', fixture('duplicate-in-file.yaml')], /metadata\.name: "webcam" is also the name of .*document 1/],
    ['a missing class file', ['--class-file', fixture('absent.yaml')], /absent\.yaml/],
    ['a --node-label without =', ['--node-label', 'edge'], /^--node-label must be key=value, got "edge"$/],
    ['--json with --watch', ['--watch', '--json'], /^--json cannot stream; use --watch -o json/],
  ]
  for (const [name, args, message] of cases) {
    it(`${name}: exit 2 with one line`, async function () {
      const run = await nfdctl(['devices', 'list', ...args])
      expect(run.exitCode, run.stdout).to.equal(2)
      expect(run.error?.message ?? JSON.parse(run.stdout).error.message).to.match(message)
      expect(run.stdout).to.not.match(/\/dev\//)
    })
  }
})
