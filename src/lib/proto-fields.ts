/**
 * The fields of a hand-written proto message type, as a value: TypeScript types are gone at run time, and
 * test/unit/proto-messages.test.ts holds these values against the .proto files. Written
 * `const xFields = {...} satisfies MessageFields<X>`, the compiler keeps value and type the same: a field on
 * one side only, or of another kind on each, fails the typecheck.
 */
export type MessageFields<T> = {readonly [K in keyof T]-?: FieldShape<NonNullable<T[K]>>}

/**
 * A field as the protos loaded with `keepCase`, `enums: String` and `longs: Number` give it: a scalar's kind
 * (an enum is a string), a nested message's own fields, or either one repeated or as a map's values.
 */
export type FieldShape<V> = [V] extends [ReadonlyArray<infer E>]
  ? readonly ['repeated', Single<E>]
  : [V] extends [Uint8Array]
    ? 'bytes'
    : string extends keyof V
      ? readonly ['map', Single<V[keyof V]>]
      : Single<V>

type Single<V> = [V] extends [string] ? 'string' : [V] extends [number] ? 'number' : [V] extends [boolean] ? 'boolean' : [V] extends [Uint8Array] ? 'bytes' : MessageFields<V>
