/** A promise with its resolve and reject. */
export interface Resolvers<T> {
  readonly promise: Promise<T>
  readonly resolve: (value: T) => void
  readonly reject: (error: unknown) => void
}

/** Promise.withResolvers, which Node 20 lacks. */
export function withResolvers<T>(): Resolvers<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return {promise, reject, resolve}
}
