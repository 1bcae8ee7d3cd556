import {expect} from 'chai'

import {changesContainers, runningAfter} from '../../../src/lib/agent/containerd-follower.js'

describe('changesContainers', function () {
  it('containers created, updated or deleted and init tasks starting or ending change which containers run', function () {
    for (const topic of ['/containers/create', '/containers/update', '/containers/delete', '/tasks/start', '/tasks/delete']) {
      expect(changesContainers({topic}), topic).to.equal(true)
    }
    expect(changesContainers({payload: {container_id: 'c1', id: 'c1'}, topic: '/tasks/exit'})).to.equal(true)
  })

  it("an exec's exit, and other task events, change nothing", function () {
    expect(changesContainers({payload: {container_id: 'c1', id: 'exec-7'}, topic: '/tasks/exit'})).to.equal(false)
    for (const topic of ['/tasks/exec-added', '/tasks/exec-started', '/tasks/oom', '/tasks/paused', '/images/create', '/tasks/start/extra']) {
      expect(changesContainers({topic}), topic).to.equal(false)
    }
  })
})

describe('runningAfter', function () {
  it("follows init processes from the events: started with their PID, gone on exit or delete; an exec's exit changes nothing", function () {
    const running = new Map([['c1', 100]])
    runningAfter(running, {payload: {container_id: 'c2', pid: 200}, topic: '/tasks/start'})
    runningAfter(running, {payload: {container_id: 'c1', id: 'exec-1', pid: 150}, topic: '/tasks/exit'})
    expect([...running]).to.deep.equal([
      ['c1', 100],
      ['c2', 200],
    ])
    runningAfter(running, {payload: {container_id: 'c1', id: 'c1', pid: 100}, topic: '/tasks/exit'})
    runningAfter(running, {payload: {container_id: 'c2', id: 'c2', pid: 200}, topic: '/tasks/delete'})
    runningAfter(running, {payload: {container_id: 'c3'}, topic: '/containers/create'})
    expect([...running]).to.deep.equal([])
  })
})
