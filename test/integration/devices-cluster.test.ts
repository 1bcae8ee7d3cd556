import {expect} from 'chai'

import type {ListedDevice} from '../../src/cli/render-devices.js'
import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import {isStatus} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {adminClient} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {nfdctl} from '../support/run-cli.js'

const nullRule = [{devName: 'null', subsystem: 'mem'}]
const classes = [
  {name: 'dl-null-everywhere', spec: {match: nullRule}},
  {name: 'dl-null-usb-nodes', spec: {match: nullRule, nodeSelector: {matchLabels: {'dl-usb': 'true'}}}},
  {name: 'dl-null-gpu-nodes', spec: {match: nullRule, nodeSelector: {matchExpressions: [{key: 'dl-gpu', operator: 'Exists'}]}}},
  // The API server cannot tell that this glob does not compile; nfdctl reports it and goes on.
  {name: 'dl-broken-glob', spec: {match: [{devName: 'tty[abc'}]}},
]

describe('devices list with DeviceClasses from the cluster', function () {
  let plane: ControlPlane
  let client: KubeClient

  before(async function () {
    ;({client, plane} = await adminClient(this))
    for (const c of classes) {
      await client.request('POST', deviceClassesPath, {body: deviceClassManifest(c.name, c.spec)})
    }
    await client.request('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {labels: {'dl-usb': 'true'}, name: 'dl-node'}}})
  })

  after(async () => {
    for (const path of [...classes.map((c) => `${deviceClassesPath}/${c.name}`), '/api/v1/nodes/dl-node']) {
      await client.request('DELETE', path).catch((error: unknown) => {
        if (!isStatus(error, 'NotFound')) throw error
      })
    }
    client?.close()
  })

  const nullClasses = (devices: ListedDevice[] | undefined): string[] => (devices ?? []).find((d) => d.devNode === '/dev/null')?.classes.filter((c) => c.startsWith('dl-')) ?? []

  it('applies the classes whose nodeSelector selects the Node, and reports an invalid class without failing', async function () {
    const run = await nfdctl<ListedDevice[]>(['devices', 'list', '--kubeconfig', plane.kubeconfig, '--node-name', 'dl-node', '--json'])
    expect(run.exitCode, run.stderr).to.equal(0)
    expect(nullClasses(run.result)).to.deep.equal(['dl-null-everywhere', 'dl-null-usb-nodes'])
    expect(run.stderr).to.match(/DeviceClass dl-broken-glob is invalid and ignored: spec\.match\[0\]\.devName/)
  })

  it('--node-label adds labels, and a Node missing from the cluster is reported', async function () {
    const run = await nfdctl<ListedDevice[]>(['devices', 'list', '--kubeconfig', plane.kubeconfig, '--node-name', 'dl-absent', '--node-label', 'dl-gpu=yes', '--json'])
    expect(run.exitCode).to.equal(0)
    expect(run.stderr).to.contain('Node dl-absent is not in the cluster')
    expect(nullClasses(run.result)).to.deep.equal(['dl-null-everywhere', 'dl-null-gpu-nodes'])
  })

  it('class files and cluster classes combine', async function () {
    const {writeFileSync, mkdtempSync} = await import('node:fs')
    const {join} = await import('node:path')
    const {tmpdir} = await import('node:os')
    const file = join(mkdtempSync(join(tmpdir(), 'nfdctl-dl-')), 'extra.yaml')
    writeFileSync(file, 'apiVersion: devices.nfdctl.io/v1alpha1\nkind: DeviceClass\nmetadata: {name: dl-from-file}\nspec:\n  match: [{subsystem: mem, devName: "null"}]\n')
    const run = await nfdctl<ListedDevice[]>(['devices', 'list', '--kubeconfig', plane.kubeconfig, '--node-name', 'dl-node', '--class-file', file, '--json'])
    expect(run.exitCode).to.equal(0)
    expect(nullClasses(run.result)).to.deep.equal(['dl-from-file', 'dl-null-everywhere', 'dl-null-usb-nodes'])
  })
})
