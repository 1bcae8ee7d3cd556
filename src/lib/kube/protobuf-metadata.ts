import protobuf from 'protobufjs/minimal.js'

import type {ObjectMeta} from './resource.js'

/** Kubernetes' protobuf encoding: what the metadata lists ask for first (see metadata-list.ts). */
export const protobufContentType = 'application/vnd.kubernetes.protobuf'

/** What a list page says about itself (ListMeta). */
export interface ListPageMeta {
  readonly resourceVersion?: string
  readonly continue?: string
  readonly remainingItemCount?: number
}

/** A metav1.Status, the body of an error answer. */
export interface StatusFields {
  readonly message?: string
  readonly reason?: string
  readonly code?: number
}

// Field numbers from k8s.io/apimachinery v0.37.2: pkg/runtime/generated.proto (Unknown) and
// pkg/apis/meta/v1/generated.proto (PartialObjectMetadataList, ListMeta, ObjectMeta, Time, Status).
const unknownField = {raw: 2} as const
const listField = {items: 2, metadata: 1} as const
const listMetaField = {continue: 3, remainingItemCount: 4, resourceVersion: 2} as const
const objectMetaField = {deletionTimestamp: 9, labels: 11, name: 1, namespace: 3, resourceVersion: 6, uid: 5} as const
const statusField = {code: 6, message: 3, reason: 4} as const
const lengthDelimited = 2

/** The 4-byte magic ("k8s" NUL) in front of every protobuf body, then a runtime.Unknown around the object. */
const magic = Buffer.from([0x6b, 0x38, 0x73, 0x00])

export function isProtobufBody(body: Buffer): boolean {
  return body.length >= magic.length && body.subarray(0, magic.length).equals(magic)
}

/** What a decoded item keeps besides its identity (name, namespace, uid, resourceVersion, deletionTimestamp). */
export interface KeptMetadata {
  /** false: labels are skipped unread (a Node's, where NFD writes a hundred and the GC reads its name). */
  readonly labels: boolean
}

/**
 * Pure: a PartialObjectMetadataList page, with each item trimmed to what nfdctl reads (toMeta's fields).
 * One reader walks the whole page; a nested message is read up to its end offset rather than through a
 * reader of its own over a slice, which made a Buffer view and a reader per item, timestamp and label.
 */
export function decodeMetadataList(body: Buffer, kept: KeptMetadata = {labels: true}): {metadata: ListPageMeta; items: ObjectMeta[]} {
  const reader = protobuf.Reader.create(unwrap(body))
  let metadata: ListPageMeta = {}
  const items: ObjectMeta[] = []
  while (reader.pos < reader.len) {
    const tag = reader.uint32()
    if (tag === ((listField.metadata << 3) | lengthDelimited)) metadata = decodeListMeta(reader, messageEnd(reader))
    else if (tag === ((listField.items << 3) | lengthDelimited)) {
      // PartialObjectMetadata: its metadata (field 1) is all it has.
      const itemEnd = messageEnd(reader)
      while (reader.pos < itemEnd) {
        const itemTag = reader.uint32()
        if (itemTag === ((1 << 3) | lengthDelimited)) items.push(decodeObjectMeta(reader, messageEnd(reader), kept))
        else reader.skipType(itemTag & 7)
      }
      checkEnd(reader, itemEnd)
    } else reader.skipType(tag & 7)
  }
  return {items, metadata}
}

/** Pure: a metav1.Status (an error answer in protobuf). */
export function decodeStatus(body: Buffer): StatusFields {
  const reader = protobuf.Reader.create(unwrap(body))
  const status: {message?: string; reason?: string; code?: number} = {}
  while (reader.pos < reader.len) {
    const tag = reader.uint32()
    const field = tag >>> 3
    if (field === statusField.message && (tag & 7) === lengthDelimited) status.message = reader.string()
    else if (field === statusField.reason && (tag & 7) === lengthDelimited) status.reason = reader.string()
    else if (field === statusField.code && (tag & 7) === 0) status.code = reader.int32()
    else reader.skipType(tag & 7)
  }
  return status
}

/** The object's bytes from the envelope: magic, then runtime.Unknown{typeMeta, raw}. */
function unwrap(body: Buffer): Uint8Array {
  if (!isProtobufBody(body)) throw new Error('not a Kubernetes protobuf body (no "k8s\\0" prefix)')
  const unknown = protobuf.Reader.create(body.subarray(magic.length))
  let raw: Uint8Array = new Uint8Array(0)
  while (unknown.pos < unknown.len) {
    const tag = unknown.uint32()
    if (tag === ((unknownField.raw << 3) | lengthDelimited)) raw = unknown.bytes()
    else unknown.skipType(tag & 7)
  }
  return raw
}

/** Where the length-delimited message that starts at the reader's position ends (its length read). */
function messageEnd(reader: protobuf.Reader): number {
  const length = reader.uint32()
  const end = reader.pos + length
  if (end > reader.len) throw new Error(`protobuf message of ${length} bytes runs past the end of the body`)
  return end
}

/** A field that ran past its message's end: the body is not what it claims to be. */
function checkEnd(reader: protobuf.Reader, end: number): void {
  if (reader.pos !== end) throw new Error(`protobuf field runs ${reader.pos - end} bytes past the end of its message`)
}

function decodeListMeta(reader: protobuf.Reader, end: number): ListPageMeta {
  const meta: {resourceVersion?: string; continue?: string; remainingItemCount?: number} = {}
  while (reader.pos < end) {
    const tag = reader.uint32()
    const field = tag >>> 3
    if (field === listMetaField.resourceVersion && (tag & 7) === lengthDelimited) meta.resourceVersion = reader.string()
    else if (field === listMetaField.continue && (tag & 7) === lengthDelimited) meta.continue = reader.string()
    else if (field === listMetaField.remainingItemCount && (tag & 7) === 0) meta.remainingItemCount = Number(reader.int64())
    else reader.skipType(tag & 7)
  }
  checkEnd(reader, end)
  return meta
}

/** ObjectMeta, reading only the fields nfdctl uses: managedFields, annotations and the rest are skipped unread. */
function decodeObjectMeta(reader: protobuf.Reader, end: number, kept: KeptMetadata): ObjectMeta {
  const meta: {-readonly [K in keyof ObjectMeta]: ObjectMeta[K]} = {name: '', uid: ''}
  let labels: Record<string, string> | undefined
  while (reader.pos < end) {
    const tag = reader.uint32()
    if ((tag & 7) !== lengthDelimited) {
      reader.skipType(tag & 7)
      continue
    }
    switch (tag >>> 3) {
      case objectMetaField.name:
        meta.name = reader.string()
        break
      case objectMetaField.namespace:
        meta.namespace = reader.string()
        break
      case objectMetaField.uid:
        meta.uid = reader.string()
        break
      case objectMetaField.resourceVersion:
        meta.resourceVersion = reader.string()
        break
      case objectMetaField.deletionTimestamp:
        meta.deletionTimestamp = decodeTime(reader, messageEnd(reader))
        break
      case objectMetaField.labels: {
        if (!kept.labels) {
          reader.skipType(lengthDelimited)
          break
        }
        const [key, value] = decodeMapEntry(reader, messageEnd(reader))
        labels ??= {}
        labels[key] = value
        break
      }
      default:
        reader.skipType(lengthDelimited)
    }
  }
  checkEnd(reader, end)
  // The keys JSON would give (toMeta's), so both decodings yield equal objects. Go writes an empty string
  // where JSON leaves the field out (a cluster-scoped object's namespace).
  return {deletionTimestamp: meta.deletionTimestamp, labels, name: meta.name, namespace: meta.namespace || undefined, resourceVersion: meta.resourceVersion || undefined, uid: meta.uid}
}

/** metav1.Time as its JSON form: RFC 3339 in UTC, whole seconds ("2026-12-04T13:00:00Z"); the zero time as none. */
function decodeTime(reader: protobuf.Reader, end: number): string | undefined {
  let seconds = 0
  while (reader.pos < end) {
    const tag = reader.uint32()
    if (tag >>> 3 === 1 && (tag & 7) === 0) seconds = Number(reader.int64())
    else reader.skipType(tag & 7)
  }
  checkEnd(reader, end)
  return seconds === 0 ? undefined : new Date(seconds * 1000).toISOString().replace('.000Z', 'Z')
}

/** One map<string, string> entry: key (1), value (2). */
function decodeMapEntry(reader: protobuf.Reader, end: number): [string, string] {
  let key = ''
  let value = ''
  while (reader.pos < end) {
    const tag = reader.uint32()
    if (tag === ((1 << 3) | lengthDelimited)) key = reader.string()
    else if (tag === ((2 << 3) | lengthDelimited)) value = reader.string()
    else reader.skipType(tag & 7)
  }
  checkEnd(reader, end)
  return [key, value]
}
