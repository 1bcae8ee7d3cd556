import {expect} from 'chai'

import type {Device} from '../../../src/lib/devices/types.js'
import {ClaimHealth} from '../../../src/lib/dra/claim-health.js'
import type {ClaimDeviceStatus, DeviceCondition} from '../../../src/lib/dra/device-health.js'
import type {PreparedClaim} from '../../../src/lib/dra/prepared-claims.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {waitFor} from '../../../harness/process/wait.js'
import {draNameOf} from '../../support/dra-claims.js'

const deviceA = loopDevice(1, {ID_SERIAL_SHORT: 'serial-a'})
const claim: PreparedClaim = {
  devices: [{access: 'rw', cdiId: 'x', className: 'serial', device: draNameOf(deviceA), request: 'dev', stableId: 'serial-a'}],
  name: 'a',
  namespace: 'lab',
  pods: [],
  uid: 'aaaaaaaa-0000-0000-0000-000000000001',
}

describe('ClaimHealth', function () {
  /** Health over one prepared claim whose device the test plugs and unplugs; status writes fail while `failing`. */
  function health() {
    const state = {failing: false, pool: new Map<string, Device>([[draNameOf(deviceA), deviceA]]), writes: [] as Array<{claim: string; devices: readonly ClaimDeviceStatus[]}>}
    const made = new ClaimHealth({
      claims: () => [claim],
      nodeName: 'worker-1',
      onNode: () => [...state.pool.values()],
      pool: () => state.pool,
      push: () => {},
      retryMs: 20,
      statuses: {
        conditions: () => new Map<string, DeviceCondition>(),
        write: async (c, devices) => {
          state.writes.push({claim: c.name, devices})
          if (state.failing) made.statusFailed()
        },
      },
    })
    return {made, state}
  }

  it("kubelet's stream and the claim's status say a claimed device is unplugged until it is back", function () {
    const {made, state} = health()
    made.recompute()
    expect(made.health().devices.map((d) => d.health)).to.deep.equal(['HEALTHY'])
    state.pool = new Map()
    made.recompute()
    const [device] = made.health().devices
    expect([device.health, device.message]).to.deep.equal(['UNHEALTHY', `unplugged: device ${draNameOf(deviceA)} (serial-a) is not present on the node`])
    made.writeStatuses()
    expect(state.writes.at(-1)?.devices[0].conditions[0]).to.deep.include({reason: 'DeviceUnplugged', status: 'False'})
  })

  it('a failed status write has every claim written again after the retry wait, once at a time, and never after stop()', async function () {
    const {made, state} = health()
    state.failing = true
    made.writeStatuses()
    made.writeStatuses()
    await waitFor('written again', async () => state.writes.length >= 4, {intervalMs: 5, timeoutMs: 2000})
    state.failing = false
    const writes = state.writes.length
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(state.writes.length, 'one more retry at most once the writes succeed').to.be.at.most(writes + 1)
    state.failing = true
    made.stop()
    made.writeStatuses()
    const stopped = state.writes.length
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(state.writes.length).to.equal(stopped)
  })

  it("takeBack() writes the claim's entries empty", function () {
    const {made, state} = health()
    made.takeBack(claim)
    expect(state.writes).to.deep.equal([{claim: 'a', devices: []}])
  })
})
