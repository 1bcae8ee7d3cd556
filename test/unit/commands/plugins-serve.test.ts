import {expect} from 'chai'
import {fileURLToPath} from 'node:url'

import {nfdctl} from '../../support/run-cli.js'

const draClasses = fileURLToPath(new URL('../../fixtures/classes/allocation-dra.yaml', import.meta.url))

// A class with allocation DRA is the DRA driver's: plugins serve says so before it serves anything.
describe('plugins serve: classes with allocation DRA', function () {
  it('--class naming one: exit 2, one line pointing at devices agent --dra', async function () {
    const run = await nfdctl(['plugins', 'serve', '--class-file', draClasses, '--node-name', 'worker-1', '--class', 'dra-disks', '--metrics-port', '0'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.equal('DeviceClass dra-disks has allocation DRA, which no device plugin serves; run devices agent --dra for it, or drop --class')
  })

  it('only such classes: exit 2, nothing to serve, and why', async function () {
    const run = await nfdctl(['plugins', 'serve', '--class-file', draClasses, '--node-name', 'worker-1', '--metrics-port', '0'])
    expect(run.exitCode).to.equal(2)
    expect(run.error?.message).to.match(/^no DeviceClass applies to node worker-1 that a device plugin serves \(the ones here have allocation DRA: devices agent --dra serves them\)/)
    expect(run.error?.message).to.not.contain('\n')
  })
})
