import {expect} from 'chai'

import type {MemberRefusal} from '../../../src/lib/devices/member-refusals.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {DeviceRefusals} from '../../../src/lib/plugins/device-refusals.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {recordingLogger} from '../../support/recording-logger.js'

const mounted = (minor: number, point: string): MemberRefusal => ({
  className: 'disks',
  device: loopDevice(minor),
  message: `/dev/loop${minor} backs the node's mount ${point}; set spec.hostCritical: Allow in the class to serve it`,
  reason: 'HostCritical',
})

describe('DeviceRefusals: what plugins serve says of the devices its classes refuse', () => {
  it('a log line per refusal once while it lasts, again when it comes back; the gauge counts what is refused now', async () => {
    const logger = recordingLogger()
    const registry = new Registry()
    const refusals = new DeviceRefusals(logger, registry)
    const gauge = async (): Promise<string> =>
      (await registry.getSingleMetricAsString('nfdctl_plugin_refused_devices'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n')

    refusals.tell([mounted(1, '/boot')])
    refusals.tell([mounted(1, '/boot'), mounted(2, '/data')])
    expect(logger.lines.map((l) => `${l.level} ${l.fields.device} ${l.fields.reason}: ${l.msg}`)).to.deep.equal([
      "warn /dev/loop1 HostCritical: device refused: /dev/loop1 backs the node's mount /boot; set spec.hostCritical: Allow in the class to serve it",
      "warn /dev/loop2 HostCritical: device refused: /dev/loop2 backs the node's mount /data; set spec.hostCritical: Allow in the class to serve it",
    ])
    expect(await gauge()).to.equal('nfdctl_plugin_refused_devices{class="disks",reason="HostCritical"} 2')

    refusals.tell([mounted(1, '/boot')]) // /data unmounted
    expect(await gauge()).to.equal('nfdctl_plugin_refused_devices{class="disks",reason="HostCritical"} 1')
    refusals.tell([mounted(1, '/boot'), mounted(2, '/data')]) // mounted again: told again
    expect(logger.lines).to.have.length(3)
    refusals.tell([])
    expect(await gauge()).to.equal('')
  })
})
