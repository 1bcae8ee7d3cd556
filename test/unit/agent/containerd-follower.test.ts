import {expect} from 'chai'

import {changesContainers} from '../../../src/lib/agent/containerd-follower.js'

describe('changesContainers', function () {
  it('containers created, updated or deleted and init tasks starting or ending change which containers run', function () {
    for (const topic of ['/containers/create', '/containers/update', '/containers/delete', '/tasks/start', '/tasks/delete']) {
      expect(changesContainers({topic}), topic).to.equal(true)
    }
    expect(changesContainers({payload: {container_id: 'c1', id: 'c1'}, topic: '/tasks/exit'})).to.equal(true)
  })

  it('an exec\'s exit, and other task events, change nothing', function () {
    expect(changesContainers({payload: {container_id: 'c1', id: 'exec-7'}, topic: '/tasks/exit'})).to.equal(false)
    for (const topic of ['/tasks/exec-added', '/tasks/exec-started', '/tasks/oom', '/tasks/paused', '/images/create', '/tasks/start/extra']) {
      expect(changesContainers({topic}), topic).to.equal(false)
    }
  })
})
