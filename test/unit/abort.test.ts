import {expect} from 'chai'
import {getEventListeners} from 'node:events'

import {AbortFanout} from '../../src/lib/abort.js'

describe('AbortFanout', () => {
  it('runs every callback once when the signal aborts, behind one listener on the signal', () => {
    const fanout = new AbortFanout()
    const controller = new AbortController()
    const ran: number[] = []
    for (let i = 0; i < 20; i++) fanout.add(controller.signal, () => ran.push(i))
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1)
    controller.abort()
    controller.abort()
    expect(ran).to.deep.equal([...Array(20).keys()])
  })

  it('does not run a callback that was taken back', () => {
    const fanout = new AbortFanout()
    const controller = new AbortController()
    let ran = false
    const takeBack = fanout.add(controller.signal, () => (ran = true))
    takeBack()
    controller.abort()
    expect(ran).to.equal(false)
  })

  it('keeps signals apart', () => {
    const fanout = new AbortFanout()
    const first = new AbortController()
    const second = new AbortController()
    let ran = ''
    fanout.add(first.signal, () => (ran += 'first'))
    fanout.add(second.signal, () => (ran += 'second'))
    second.abort()
    expect(ran).to.equal('second')
  })
})
