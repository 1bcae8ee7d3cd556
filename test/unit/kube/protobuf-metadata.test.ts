import {expect} from 'chai'
import protobuf from 'protobufjs/minimal.js'

import {decodeMetadataList, decodeStatus, isProtobufBody} from '../../../src/lib/kube/protobuf-metadata.js'

// Bodies written field by field as kube-apiserver writes them (k8s.io/apimachinery v0.37.2 generated.proto):
// "k8s\0", runtime.Unknown{typeMeta 1, raw 2, contentEncoding 3, contentType 4}, the object in raw. The
// real server's bytes are decoded in test/integration (listing both ways gives the same objects).
type Build = (w: protobuf.Writer) => void
const message = (w: protobuf.Writer, field: number, build: Build): void => {
  w.uint32((field << 3) | 2).fork()
  build(w)
  w.ldelim()
}
const str = (w: protobuf.Writer, field: number, value: string): void => void w.uint32((field << 3) | 2).string(value)
const time = (w: protobuf.Writer, field: number, seconds: number): void => message(w, field, (t) => void t.uint32(8).int64(seconds))
const envelope = (kind: string, build: Build): Buffer => {
  const w = protobuf.Writer.create()
  message(w, 1, (tm) => {
    str(tm, 1, 'meta.k8s.io/v1')
    str(tm, 2, kind)
  })
  message(w, 2, build)
  str(w, 3, '')
  str(w, 4, '')
  return Buffer.concat([Buffer.from('k8s\0', 'latin1'), w.finish()])
}

const objectMeta = (w: protobuf.Writer, o: {name: string; namespace?: string; uid: string; rv: string; labels?: Record<string, string>; created: number; deleted?: number}): void => {
  str(w, 1, o.name)
  str(w, 2, `${o.name}-`) // generateName: skipped
  if (o.namespace !== undefined) str(w, 3, o.namespace) // Go writes '' for a cluster-scoped object
  str(w, 5, o.uid)
  str(w, 6, o.rv)
  w.uint32(7 << 3).int64(3) // generation: a varint, skipped
  time(w, 8, o.created) // creationTimestamp: skipped (nothing reads it)
  if (o.deleted !== undefined) time(w, 9, o.deleted)
  for (const [k, v] of Object.entries(o.labels ?? {}))
    message(w, 11, (e) => {
      str(e, 1, k)
      str(e, 2, v)
    })
  message(w, 12, (e) => {
    // an annotation: skipped
    str(e, 1, 'note')
    str(e, 2, 'x'.repeat(1000))
  })
  message(w, 17, (m) => {
    // managedFields: skipped unread
    str(m, 1, 'nfd-worker')
    str(m, 2, 'Apply')
  })
}

describe('protobuf metadata lists', function () {
  it('decodes a PartialObjectMetadataList page: the list metadata, and each item trimmed to what nfdctl reads', function () {
    const body = envelope('PartialObjectMetadataList', (w) => {
      message(w, 1, (m) => {
        str(m, 2, '4242')
        str(m, 3, 'eyJ2IjoibWV0YSJ9')
        m.uint32(4 << 3).int64(1499)
      })
      message(w, 2, (item) =>
        message(item, 1, (m) => objectMeta(m, {created: 1796393343, labels: {'nfd.node.kubernetes.io/node-name': 'worker-1', zone: 'a'}, name: 'worker-1', namespace: 'nfd', rv: '17', uid: 'u-1'})),
      )
      message(w, 2, (item) => message(item, 1, (m) => objectMeta(m, {created: 0, deleted: 1796393400, name: 'worker-2', namespace: '', rv: '18', uid: 'u-2'})))
    })
    expect(isProtobufBody(body)).to.equal(true)
    expect(decodeMetadataList(body)).to.deep.equal({
      items: [
        {deletionTimestamp: undefined, labels: {'nfd.node.kubernetes.io/node-name': 'worker-1', zone: 'a'}, name: 'worker-1', namespace: 'nfd', resourceVersion: '17', uid: 'u-1'},
        {deletionTimestamp: '2026-12-04T14:10:00Z', labels: undefined, name: 'worker-2', namespace: undefined, resourceVersion: '18', uid: 'u-2'},
      ],
      metadata: {continue: 'eyJ2IjoibWV0YSJ9', remainingItemCount: 1499, resourceVersion: '4242'},
    })
  })

  it("skips labels unread when asked (a Node with NFD's labels), keeping the rest of each item", function () {
    const labels = Object.fromEntries([...Array(100).keys()].map((i) => [`feature.node.kubernetes.io/cpu-cpuid.F${i}`, 'true']))
    const body = envelope('PartialObjectMetadataList', (w) => {
      message(w, 1, (m) => str(m, 2, '7'))
      message(w, 2, (item) => message(item, 1, (m) => objectMeta(m, {created: 1796393343, labels, name: 'worker-1', rv: '5', uid: 'u-1'})))
      message(w, 2, (item) => message(item, 1, (m) => objectMeta(m, {created: 0, deleted: 1796393400, labels: {zone: 'a'}, name: 'worker-2', namespace: '', rv: '6', uid: 'u-2'})))
    })
    expect(decodeMetadataList(body, {labels: false})).to.deep.equal({
      items: [
        {deletionTimestamp: undefined, labels: undefined, name: 'worker-1', namespace: undefined, resourceVersion: '5', uid: 'u-1'},
        {deletionTimestamp: '2026-12-04T14:10:00Z', labels: undefined, name: 'worker-2', namespace: undefined, resourceVersion: '6', uid: 'u-2'},
      ],
      metadata: {resourceVersion: '7'},
    })
    expect(decodeMetadataList(body).items[0]!.labels).to.deep.equal(labels)
  })

  it('an empty last page: no continue token, no items', function () {
    const body = envelope('PartialObjectMetadataList', (w) =>
      message(w, 1, (m) => {
        str(m, 2, '99')
        str(m, 3, '')
      }),
    )
    expect(decodeMetadataList(body)).to.deep.equal({items: [], metadata: {continue: '', resourceVersion: '99'}})
  })

  it('decodes a Status (an error answer) for its message, reason and code', function () {
    const body = envelope('Status', (w) => {
      message(w, 1, () => {})
      str(w, 2, 'Failure')
      str(w, 3, 'the provided continue parameter is too old')
      str(w, 4, 'Expired')
      w.uint32(6 << 3).int32(410)
    })
    expect(decodeStatus(body)).to.deep.equal({code: 410, message: 'the provided continue parameter is too old', reason: 'Expired'})
  })

  it('refuses a body without the "k8s\\0" prefix (JSON, a proxy\'s page)', function () {
    expect(isProtobufBody(Buffer.from('{"kind":"Status"}'))).to.equal(false)
    expect(() => decodeMetadataList(Buffer.from('<html>'))).to.throw(/not a Kubernetes protobuf body/)
  })

  it("refuses an item whose metadata runs past the item's end, and a body cut short", function () {
    // An item that says it is 4 bytes long, holding an ObjectMeta that says it is 12: read as written, the
    // ObjectMeta would take its name from the next item's bytes.
    const overrun = envelope('PartialObjectMetadataList', (w) => {
      w.uint32((2 << 3) | 2).uint32(4)
      w.uint32((1 << 3) | 2).uint32(12)
      str(w, 1, 'ab')
      str(w, 2, 'next-item')
    })
    expect(() => decodeMetadataList(overrun)).to.throw(/runs \d+ bytes past the end of its message/)
    const whole = envelope('PartialObjectMetadataList', (w) => message(w, 2, (item) => message(item, 1, (m) => objectMeta(m, {created: 1, name: 'worker-1', rv: '1', uid: 'u'}))))
    expect(() => decodeMetadataList(whole.subarray(0, whole.length - 40))).to.throw()
  })
})
