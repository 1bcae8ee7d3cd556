import {mkdir, readFile} from 'node:fs/promises'
import {dirname} from 'node:path'

import {writeFileAtomic, type AtomicWriteOptions} from './atomic-write.js'

/**
 * Reads a state file: its decoded value, nothing when there is no file, or the problem (to be reported; the
 * next write replaces the file) when it cannot be read or decoded.
 */
export async function readStateFile<T>(file: string, decode: (text: string) => T): Promise<{value?: T; problem?: string}> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    return {problem: (error as Error).message}
  }
  try {
    return {value: decode(text)}
  } catch (error) {
    return {problem: `${file}: ${(error as Error).message}`}
  }
}

/**
 * A state file that many changes write: writes are serialised and coalesced, so that every change made
 * before a write starts is in it, and a caller that waits for `save()` knows its change is on disk. The
 * content is read from `content()` when a write starts. A failed write leaves the file dirty: the next
 * save writes again.
 */
export class CoalescedFile {
  /** The last write, settled. */
  #written: Promise<void> = Promise.resolve()
  /** The write queued behind it, which takes every change made until it starts. */
  #queued: Promise<void> | undefined
  /** The newest write, unsettled or not: it has every change made before it started. */
  #newest: Promise<void> = Promise.resolve()
  #dirty = false

  constructor(
    readonly file: string,
    readonly content: () => string,
    readonly options: AtomicWriteOptions = {},
  ) {}

  /** A change not yet on disk (one made since the last write started, or a write that failed). */
  get dirty(): boolean {
    return this.#dirty
  }

  /** Writes the content; resolves once a write that started after this call is on disk. */
  save(): Promise<void> {
    this.#dirty = true
    if (this.#queued !== undefined) return this.#queued
    const queued = this.#written.then(async () => {
      this.#queued = undefined
      this.#dirty = false
      try {
        await mkdir(dirname(this.file), {mode: 0o700, recursive: true})
        await writeFileAtomic(this.file, this.content(), this.options)
      } catch (error) {
        this.#dirty = true
        throw error
      }
    })
    this.#queued = queued
    this.#newest = queued
    this.#written = queued.catch(() => {})
    return queued
  }

  /** Resolves once every change so far is on disk: a write in flight is waited for, a pending change written. */
  flushed(): Promise<void> {
    return this.#dirty ? this.save() : this.#newest
  }
}
