import {expect} from 'chai'

import {MetadataInformer} from '../../../src/lib/kube/informer.js'
import {nodesResource, type ObjectMeta} from '../../../src/lib/kube/resource.js'
import {FakeWatchClient} from '../../support/fake-watch-client.js'
import {settle, VirtualTimers} from '../../support/virtual-timers.js'

const nodesPath = '/api/v1/nodes'
const node = (name: string, resourceVersion = '1'): {metadata: ObjectMeta} => ({metadata: {name, resourceVersion, uid: `uid-${name}`}})
const page = (resourceVersion: string, names: string[], continueToken?: string) => ({items: names.map((n) => node(n)), metadata: {continue: continueToken, resourceVersion}})

describe('Informer (against a fake API server)', () => {
  const idleMs = 60_000
  const informers: MetadataInformer[] = []

  afterEach(async () => {
    for (const informer of informers.splice(0)) await informer.stop()
  })

  function informerOf() {
    const client = new FakeWatchClient()
    const timers = new VirtualTimers()
    const changed: Array<[name: string | undefined, previousRv: string | undefined]> = []
    const deleted: string[] = []
    const connection: boolean[] = []
    const informer = new MetadataInformer({
      client,
      onChanged: (object, previous) => changed.push([object?.name, previous?.resourceVersion]),
      onConnection: (connected) => connection.push(connected),
      onDeleted: (object) => deleted.push(object.name),
      pageSize: 2,
      random: () => 0.5, // no jitter: the back-off is 1 s, 2 s, 4 s …
      resource: nodesResource,
      timers,
      watchIdleTimeoutMs: idleMs,
      watchTimeoutSeconds: 300,
    })
    informers.push(informer)
    const names = (): string[] => [...informer.cache.keys()].sort()
    return {changed, client, connection, deleted, informer, names, timers}
  }

  async function started() {
    const s = informerOf()
    s.client.answer('GET', nodesPath, page('10', ['a', 'b']))
    await s.informer.start(new AbortController().signal)
    const watch = await s.client.watch(0)
    return {...s, watch}
  }

  it('lists page by page, then watches from the list’s resourceVersion with bookmarks', async () => {
    const s = informerOf()
    s.client.answer('GET', nodesPath, page('', ['a', 'b'], 'next'))
    s.client.answer('GET', nodesPath, page('10', ['c']))
    await s.informer.start(new AbortController().signal)
    expect(s.informer.synced).to.equal(true)
    expect(s.names()).to.deep.equal(['a', 'b', 'c'])
    const watch = await s.client.watch(0)
    expect(s.client.requests).to.deep.equal([`GET ${nodesPath}`, `GET ${nodesPath}`, `WATCH ${nodesPath}`])
    expect(s.client.sent.map((r) => r.query?.continue)).to.deep.equal([undefined, 'next', undefined])
    expect(s.client.sent[0]!.query?.limit).to.equal(2)
    expect(watch.query).to.include({allowWatchBookmarks: true, resourceVersion: '10', timeoutSeconds: 300, watch: true})
    expect(s.changed, 'the cache replaced once').to.deep.equal([[undefined, undefined]])
    expect(s.connection).to.deep.equal([true])
  })

  it('keeps the cache and tells the listeners of ADDED, MODIFIED and DELETED events', async () => {
    const s = await started()
    s.watch.event('ADDED', node('c', '11'))
    s.watch.event('MODIFIED', node('a', '12'))
    s.watch.event('DELETED', node('b', '13'))
    await settle()
    expect(s.names()).to.deep.equal(['a', 'c'])
    expect(s.informer.cache.get('a')?.resourceVersion).to.equal('12')
    expect(s.changed.slice(1)).to.deep.equal([
      ['c', undefined],
      ['a', '1'],
    ])
    expect(s.deleted).to.deep.equal(['b'])
  })

  it('resumes a watch the server ended from the last event or bookmark, without back-off', async () => {
    const s = await started()
    s.watch.event('ADDED', node('c', '11'))
    s.watch.bookmark('20')
    s.watch.end()
    const next = await s.client.watch(1)
    expect(next.query?.resourceVersion).to.equal('20')
    expect(s.timers.now(), 'no time passed').to.equal(0)
    expect(
      s.client.requests.filter((r) => r.startsWith('GET')),
      'no relist',
    ).to.have.length(1)
  })

  for (const [how, expire] of [
    ['an ERROR event 410 in the stream', (s: Awaited<ReturnType<typeof started>>) => s.watch.errorEvent(410)],
    [
      'a 410 answer to the watch',
      (s: Awaited<ReturnType<typeof started>>) => {
        s.client.refuseWatch(410)
        s.watch.end()
      },
    ],
  ] as const) {
    it(`relists after ${how}, replaces the cache and tells the deletions it missed`, async () => {
      const s = await started()
      s.client.answer('GET', nodesPath, page('30', ['a', 'c']))
      expire(s)
      const watch = await s.client.watch(1)
      expect(s.names()).to.deep.equal(['a', 'c'])
      expect(s.deleted, 'b vanished while the watch was away').to.deep.equal(['b'])
      expect(s.changed.at(-1), 'the cache replaced').to.deep.equal([undefined, undefined])
      expect(watch.query?.resourceVersion).to.equal('30')
      expect(s.timers.now(), 'a relist needs no back-off').to.equal(0)
    })
  }

  it('reconnects a failed watch after the shared back-off, growing while it keeps failing', async () => {
    const s = await started()
    s.watch.event('MODIFIED', node('a', '15'))
    await settle()
    s.client.refuseWatch(500)
    s.watch.fail(new Error('connection reset'))
    await settle()
    expect(s.informer.connected).to.equal(false)
    expect(s.connection).to.deep.equal([true, false])
    await s.timers.advanceTo(999)
    expect(s.client.watches, 'not before 1 s').to.have.length(1)
    await s.timers.advanceTo(1000)
    expect(s.client.requests.at(-1), 'the refused attempt').to.equal(`WATCH ${nodesPath}`)
    await s.timers.advanceTo(2999)
    expect(s.client.watches, 'the second wait is 2 s').to.have.length(1)
    await s.timers.advanceTo(3000)
    const watch = await s.client.watch(1)
    expect(watch.query?.resourceVersion, 'resumed, not relisted').to.equal('15')
    expect(s.client.requests.filter((r) => r.startsWith('GET'))).to.have.length(1)
    expect(s.informer.connected).to.equal(true)
    expect(s.connection).to.deep.equal([true, false, true])
  })

  it('retries a failed first list after the back-off and is synced by the retry', async () => {
    const s = informerOf()
    s.client.fail('GET', nodesPath, new Error('connect ECONNREFUSED'))
    s.client.answer('GET', nodesPath, page('10', ['a']))
    let synced = false
    const start = s.informer.start(new AbortController().signal).then(() => (synced = true))
    await settle()
    expect(synced).to.equal(false)
    await s.timers.advanceTo(1000)
    await start
    expect(s.names()).to.deep.equal(['a'])
    expect(s.connection).to.deep.equal([false, true])
  })

  it('restarts a watch that heard no event or bookmark for the idle timeout', async () => {
    const s = await started()
    await s.timers.advanceTo(idleMs - 1)
    s.watch.bookmark('11')
    await settle()
    await s.timers.advanceTo(2 * idleMs - 2)
    expect(s.watch.signal.aborted, 'a bookmark re-arms the timeout').to.equal(false)
    await s.timers.advanceTo(2 * idleMs - 1)
    expect(s.watch.signal.aborted).to.equal(true)
    expect(s.watch.closed).to.equal(true)
    expect(s.informer.connected).to.equal(false)
    await s.timers.advanceTo(2 * idleMs - 1 + 1000)
    const watch = await s.client.watch(1)
    expect(watch.query?.resourceVersion).to.equal('11')
  })

  it('stop() ends the watch and the loop, leaves no timer, and can be called again', async () => {
    const s = await started()
    await s.informer.stop()
    expect(s.watch.signal.aborted).to.equal(true)
    expect(s.watch.closed).to.equal(true)
    expect(s.timers.pending, 'the idle timer is cleared').to.equal(0)
    await s.informer.stop()
    await s.timers.advanceTo(10 * idleMs)
    expect(s.client.requests).to.have.length(2)
  })

  it('stop() during the back-off ends the wait without another attempt', async () => {
    const s = await started()
    s.watch.fail(new Error('connection reset'))
    await settle()
    expect(s.timers.pending, 'the back-off timer').to.equal(1)
    await s.informer.stop()
    expect(s.timers.pending).to.equal(0)
    await s.timers.advanceTo(60_000)
    expect(s.client.requests).to.have.length(2)
  })
})
