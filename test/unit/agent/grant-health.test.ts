import {expect} from 'chai'

import {afterBatch, grantProblem, healthyGrants, type BatchOutcome} from '../../../src/lib/agent/grant-health.js'

const fail = (lastError: string): BatchOutcome => ({failed: 1, lastError, succeeded: 0})

describe('grant-health: grants that keep failing make the agent not ready', () => {
  it('three batches in a row where no container could be changed; the reason names the last error', () => {
    let health = healthyGrants
    health = afterBatch(health, fail('container abc: process 4242 does not exist any more; nothing is written through it'))
    health = afterBatch(health, fail('EROFS: read-only file system, open devices.allow'))
    expect(grantProblem(health), 'two failing batches are a container that went away meanwhile').to.equal(undefined)
    health = afterBatch(health, fail('container abc: process 4242 does not exist any more; nothing is written through it'))
    expect(grantProblem(health)).to.equal(
      'grants failing: no container could be changed in 3 batches in a row, the last error: container abc: process 4242 does not exist any more; nothing is written through it',
    )
  })

  it('a batch in which any container was brought to its plan ends the run; one that looked at none judges nothing', () => {
    let health = healthyGrants
    for (let i = 0; i < 5; i++) health = afterBatch(health, fail('EPERM'))
    expect(afterBatch(health, {failed: 0, succeeded: 0})).to.equal(health)
    expect(grantProblem(afterBatch(health, {failed: 0, succeeded: 0}))).to.match(/in 5 batches in a row/)
    health = afterBatch(health, {failed: 3, lastError: 'EPERM', succeeded: 1})
    expect(health).to.deep.equal(healthyGrants)
    expect(grantProblem(health)).to.equal(undefined)
  })
})
