import {expect} from 'chai'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {createAgentMetrics} from '../../../src/lib/agent/agent-metrics.js'
import {ContainerReconciler, type NodeView} from '../../../src/lib/agent/container-reconciler.js'
import {GrantRecord} from '../../../src/lib/agent/grant-record.js'
import type {ContainerWork} from '../../../src/lib/agent/reconcile-plan.js'
import {noopLogger} from '../../../src/lib/observe/logger.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {loopDevice} from '../../../harness/devices/loop-device.js'
import {deviceClass} from '../../support/device-class.js'

/** Above any pid_max: pidfd_open answers ESRCH, so every look at the container ends in "gone" (no root needed). */
const goneProcess = 0x3fff_fff0

const low = deviceClass('low', {match: [{devName: 'loop[0-4]', subsystem: 'block'}]})
const work: ContainerWork = {
  asked: true,
  container: {id: 'c1', labels: {}},
  pid: goneProcess,
  request: {classes: new Map([['low', 'annotation']]), container: 'app', namespace: 'ns', pod: 'p', podUid: 'uid-p'},
}
const nodeAt = (generation: number): NodeView => ({
  classes: new Map([['low', low]]),
  generation,
  known: () => undefined,
  members: new Map([['low', [loopDevice(1)]]]),
  owned: () => undefined,
  ownedGeneration: 1,
  touchedAt: () => 0,
})

describe('ContainerReconciler: one container brought to its plan', function () {
  let dir: string
  beforeEach(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-reconciler-'))
  })
  afterEach(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it("does not take a container back to members older than the ones it was given (a batch that read them before the device lane's)", async function () {
    const looked: string[] = []
    const reconciler = new ContainerReconciler({
      cgroupMode: 'auto',
      grants: new GrantRecord({stateDir: dir}),
      logger: noopLogger,
      metrics: createAgentMetrics(new Registry()),
      onSkipped: (error) => looked.push(error.message),
    })
    expect(await reconciler.reconcile(work, nodeAt(5), new Map())).to.equal(true)
    expect(looked, 'looked at: its process is gone').to.have.length(1)
    expect(await reconciler.reconcile(work, nodeAt(4), new Map()), 'it may still hold devices').to.equal(true)
    expect(looked, 'older members: not looked at').to.have.length(1)
    await reconciler.reconcile(work, nodeAt(5), new Map())
    await reconciler.reconcile(work, nodeAt(6), new Map())
    expect(looked, 'the same or newer members: looked at').to.have.length(3)
  })
})
