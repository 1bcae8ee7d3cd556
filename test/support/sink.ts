import {Writable} from 'node:stream'

/** A stream that keeps what is written to it, for a logger or a child's stderr under test. */
export interface Sink extends Writable {
  /** Everything written so far. */
  text(): string
  /** What was written so far, split into lines; empty lines left out. */
  lines(): string[]
}

export function sink(): Sink {
  const chunks: Buffer[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(Buffer.from(chunk))
      done()
    },
  })
  const text = (): string => Buffer.concat(chunks).toString('utf8')
  const lines = (): string[] => text().match(/[^\n]+/g) ?? []
  return Object.assign(stream, {lines, text})
}
