import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import path from 'node:path'

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

// The disk under / on this machine, as devices list shows it with classes that match every block device.
describe('devices list: host-critical devices', function () {
  let tmp: string
  let root: {major: number; minor: number}

  before(function () {
    const {dev} = statSync('/')
    root = {major: Math.floor(dev / 256) & 0xfff, minor: (dev & 0xff) | ((Math.floor(dev / 4096) & ~0xff) >>> 0)}
    if (root.major === 0) {
      if (process.env.CI === 'true') expect.fail('/ is not on a block device on this CI machine')
      this.skip() // a container's overlay root: no disk to find
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'nfdctl-list-'))
    const classes = [
      {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'disks'}, spec: {match: [{subsystem: 'block'}]}},
      {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: 'admin-disks'}, spec: {hostCritical: 'Allow', match: [{subsystem: 'block'}]}},
    ]
    writeFileSync(path.join(tmp, 'classes.json'), JSON.stringify({apiVersion: 'v1', items: classes, kind: 'List'}))
  })

  after(function () {
    if (tmp !== undefined) rmSync(tmp, {force: true, recursive: true})
  })

  it("shows the root filesystem's disk as not served by a class without hostCritical: Allow, and why; served by one with it", async function () {
    const run = await nfdctl<Array<{major: number; minor: number; classes: string[]; refused?: Record<string, string>}>>(['devices', 'list', '--class-file', path.join(tmp, 'classes.json'), '--json'])
    expect(run.exitCode, run.stderr).to.equal(0)
    const disk = run.result?.find((d) => d.major === root.major && d.minor === root.minor)
    expect(disk, JSON.stringify(run.result)).to.not.equal(undefined)
    expect(disk?.classes).to.deep.equal(['admin-disks'])
    expect(disk?.refused?.disks).to.match(/^\/dev\/\S+ backs the node's mount \/; set spec\.hostCritical: Allow in the class to serve it$/)

    const table = await nfdctl(['devices', 'list', '--class-file', path.join(tmp, 'classes.json')])
    expect(table.stdout).to.match(/admin-disks,!disks/)
    expect(table.stderr).to.match(/is not served by DeviceClass disks: \/dev\/\S+ backs the node's mount \/; set spec\.hostCritical: Allow in the class to serve it/)
  })
})
