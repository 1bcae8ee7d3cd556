import {expect} from 'chai'

import {LeaderElector} from '../../../src/lib/kube/leader-elector.js'
import {FakeApiClient} from '../../support/fake-api-client.js'
import {settle, VirtualTimers} from '../../support/virtual-timers.js'

const leases = '/apis/coordination.k8s.io/v1/namespaces/ops/leases'
const lease = `${leases}/gc`
const retryPeriodMs = 500
const renewDeadlineMs = 2000

interface LeaseSpec {
  holderIdentity?: string
  leaseDurationSeconds?: number
  leaseTransitions?: number
  acquireTime?: string
  renewTime?: string
}
const leaseOf = (resourceVersion: string, spec: LeaseSpec) => ({apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name: 'gc', namespace: 'ops', resourceVersion}, spec})
const held = (holderIdentity: string, resourceVersion = '1', renewTime = '2026-01-01T00:00:00.000000Z') =>
  leaseOf(resourceVersion, {holderIdentity, leaseDurationSeconds: 3, leaseTransitions: 2, renewTime})

describe('LeaderElector (against a fake API server)', () => {
  const electors: LeaderElector[] = []

  afterEach(async () => {
    for (const elector of electors.splice(0)) await elector.stop()
  })

  function electorOf() {
    const client = new FakeApiClient()
    const timers = new VirtualTimers()
    const calls: string[] = []
    let leading: AbortSignal | undefined
    const elector = new LeaderElector({
      client,
      identity: 'me',
      leaseDurationMs: 3000,
      name: 'gc',
      namespace: 'ops',
      onStartedLeading: (signal) => {
        leading = signal
        calls.push('started')
      },
      onStoppedLeading: async () => {
        await settle()
        calls.push(`stopped after ${client.requests.length} requests`)
      },
      renewDeadlineMs,
      retryPeriodMs,
      timers,
    })
    electors.push(elector)
    const bodyOf = (index: number) => client.sent.at(index)!.body as ReturnType<typeof leaseOf>
    return {bodyOf, calls, client, elector, leading: () => leading, timers}
  }

  /** A round every retry period: answers its GET (and the write that follows) before the clock reaches it. */
  async function round(s: ReturnType<typeof electorOf>, at: number, get: unknown, write?: {method: 'POST' | 'PUT'; answer: unknown}) {
    if (get === 404) s.client.fail('GET', lease, 404)
    else s.client.answer('GET', lease, get)
    if (write?.method === 'POST') s.client.answer('POST', leases, write.answer)
    else if (typeof write?.answer === 'number') s.client.fail('PUT', lease, write.answer)
    else if (write) s.client.answer('PUT', lease, write.answer)
    await s.timers.advanceTo(at)
  }

  async function leader() {
    const s = electorOf()
    s.client.fail('GET', lease, 404)
    s.client.answer('POST', leases, held('me', '5'))
    s.elector.start(new AbortController().signal)
    await settle()
    expect(s.elector.isLeader).to.equal(true)
    return s
  }

  it('creates a lease nobody holds and starts leading', async () => {
    const s = await leader()
    expect(s.client.requests).to.deep.equal([`GET ${lease}`, `POST ${leases}`])
    expect(s.bodyOf(1).spec).to.include({holderIdentity: 'me', leaseDurationSeconds: 3, leaseTransitions: 0})
    expect(s.bodyOf(1).spec.renewTime).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    expect(s.calls).to.deep.equal(['started'])
    expect(s.leading()?.aborted).to.equal(false)
    expect(s.elector.healthy).to.equal(true)
  })

  it('renews its lease every retry period, conditionally on the resourceVersion it read', async () => {
    const s = await leader()
    await round(s, retryPeriodMs, held('me', '5'), {answer: held('me', '6'), method: 'PUT'})
    await round(s, 2 * retryPeriodMs, held('me', '6'), {answer: held('me', '7'), method: 'PUT'})
    expect(s.client.requests.slice(2)).to.deep.equal([`GET ${lease}`, `PUT ${lease}`, `GET ${lease}`, `PUT ${lease}`])
    expect(s.bodyOf(3).metadata.resourceVersion).to.equal('5')
    expect(s.bodyOf(5).metadata.resourceVersion).to.equal('6')
    expect(s.bodyOf(5).spec).to.include({holderIdentity: 'me', leaseTransitions: 2})
    expect(s.elector.isLeader).to.equal(true)
    expect(s.calls).to.deep.equal(['started'])
  })

  it('waits while another holder renews its lease, and takes it over once it is a lease duration old on our clock', async () => {
    const s = electorOf()
    s.client.answer('GET', lease, held('other', '1', 't1'))
    s.elector.start(new AbortController().signal)
    await settle()
    // The holder renews at 1 s, so its lease is fresh until 4 s on our clock even though 3 s pass.
    await round(s, 500, held('other', '1', 't1'))
    await round(s, 1000, held('other', '2', 't2'))
    for (const at of [1500, 2000, 2500, 3000, 3500]) await round(s, at, held('other', '2', 't2'))
    expect(s.elector.isLeader).to.equal(false)
    expect(s.client.requests.every((r) => r === `GET ${lease}`)).to.equal(true)
    await round(s, 4000, held('other', '2', 't2'), {answer: held('me', '3'), method: 'PUT'})
    expect(s.client.requests.at(-1)).to.equal(`PUT ${lease}`)
    expect(s.bodyOf(-1).spec).to.include({holderIdentity: 'me', leaseTransitions: 3})
    expect(s.bodyOf(-1).metadata.resourceVersion).to.equal('2')
    expect(s.elector.isLeader).to.equal(true)
    expect(s.calls).to.deep.equal(['started'])
  })

  it('takes a released lease at once', async () => {
    const s = electorOf()
    s.client.answer('GET', lease, leaseOf('4', {holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 1}))
    s.client.answer('PUT', lease, held('me', '5'))
    s.elector.start(new AbortController().signal)
    await settle()
    expect(s.elector.isLeader).to.equal(true)
    expect(s.bodyOf(1).spec).to.include({holderIdentity: 'me', leaseTransitions: 2})
  })

  it('a 409 on the takeover is a lost race: not leading, not unhealthy, and tries again next period', async () => {
    const s = electorOf()
    s.client.answer('GET', lease, leaseOf('4', {holderIdentity: ''}))
    s.client.fail('PUT', lease, 409)
    s.elector.start(new AbortController().signal)
    await settle()
    expect(s.client.requests).to.deep.equal([`GET ${lease}`, `PUT ${lease}`])
    expect(s.elector.isLeader).to.equal(false)
    expect(s.elector.healthy).to.equal(true)
    expect(s.calls).to.deep.equal([])
    await round(s, retryPeriodMs, held('winner', '5'))
    expect(s.client.requests).to.have.length(3)
    expect(s.elector.isLeader).to.equal(false)
  })

  it('steps down when another replica holds the lease through the renew deadline', async () => {
    const s = await leader()
    for (const at of [500, 1000, 1500]) await round(s, at, held('thief', '9'))
    expect(s.elector.isLeader, 'still within the renew deadline').to.equal(true)
    expect(s.leading()?.aborted).to.equal(false)
    await round(s, 2000, held('thief', '9'))
    expect(s.elector.isLeader).to.equal(false)
    expect(s.leading()?.aborted, 'the leader work is told to stop').to.equal(true)
    expect(s.calls).to.deep.equal(['started', 'stopped after 6 requests'])
    expect(s.elector.healthy).to.equal(true)
  })

  it('steps down when renewals fail for the renew deadline after the last one that succeeded, and says it is unhealthy', async () => {
    const s = await leader()
    await round(s, 500, held('me', '5'), {answer: held('me', '6'), method: 'PUT'})
    await round(s, 1000, held('me', '6'), {answer: held('me', '7'), method: 'PUT'})
    await s.timers.advanceTo(2500) // nothing queued: every GET is a 503
    expect(s.elector.isLeader, 'the deadline counts from the renewal at 1 s').to.equal(true)
    expect(s.elector.healthy).to.equal(false)
    await s.timers.advanceTo(3000)
    expect(s.elector.isLeader).to.equal(false)
    expect(s.leading()?.aborted).to.equal(true)
    expect(s.calls).to.deep.equal(['started', 'stopped after 10 requests'])
  })

  it('stop() awaits onStoppedLeading, then releases the lease it holds', async () => {
    const s = await leader()
    s.client.answer('PUT', lease, held('', '6'))
    await Promise.all([s.elector.stop(), s.elector.stop()])
    expect(s.calls).to.deep.equal(['started', 'stopped after 2 requests'])
    expect(s.client.requests).to.deep.equal([`GET ${lease}`, `POST ${leases}`, `PUT ${lease}`])
    expect(s.bodyOf(2).spec).to.include({holderIdentity: '', leaseDurationSeconds: 1})
    expect(s.bodyOf(2).metadata.resourceVersion).to.equal('5')
    expect(s.leading()?.aborted).to.equal(true)
    expect(s.timers.pending, 'the retry period timer is cleared').to.equal(0)
  })

  it('stop() while not leading neither calls onStoppedLeading nor writes the lease', async () => {
    const s = electorOf()
    s.client.answer('GET', lease, held('other'))
    s.elector.start(new AbortController().signal)
    await settle()
    await s.elector.stop()
    expect(s.calls).to.deep.equal([])
    expect(s.client.requests).to.deep.equal([`GET ${lease}`])
    await s.timers.advanceTo(10_000)
    expect(s.client.requests).to.have.length(1)
  })
})
