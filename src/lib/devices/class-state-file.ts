import {mkdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {errorMessage} from '../errors.js'
import type {Logger} from '../observe/logger.js'
import {writeFileAtomic} from '../sys/atomic-write.js'
import {listedClass} from './cluster-classes.js'
import type {DeviceClass} from './types.js'

/** What `--state-dir` keeps: enough to serve the node's classes when the API server is away at start. */
export interface ClassState {
  readonly version: 1
  readonly node: string
  readonly savedAt: string
  readonly nodeLabels: Record<string, string>
  readonly classes: DeviceClass[]
}

export interface ClassStateFileOptions {
  readonly stateDir: string
  readonly nodeName: string
  readonly logger: Logger
  /** A write failed, for the caller's metrics. */
  readonly onWriteError?: (error: unknown) => void
}

/**
 * The node's classes persisted under --state-dir (classes.json), for a start without the API server: written
 * atomically, one write after another so that the file always ends with the latest classes; read back with
 * every class validated again.
 */
export class ClassStateFile {
  readonly file: string
  #writing: Promise<void> = Promise.resolve()

  constructor(readonly options: ClassStateFileOptions) {
    this.file = join(options.stateDir, 'classes.json')
  }

  /** Queued behind the writes before it; a failure is logged and reported, never thrown. */
  write(classes: DeviceClass[], nodeLabels: Record<string, string>): void {
    const {logger, nodeName, onWriteError, stateDir} = this.options
    const state: ClassState = {classes, node: nodeName, nodeLabels, savedAt: new Date().toISOString(), version: 1}
    this.#writing = this.#writing
      .then(async () => {
        await mkdir(stateDir, {mode: 0o700, recursive: true})
        await writeFileAtomic(this.file, JSON.stringify(state, null, 2) + '\n', {mode: 0o600})
      })
      .catch((error: unknown) => {
        onWriteError?.(error)
        logger.error({err: errorMessage(error), file: this.file}, 'cannot persist the DeviceClasses; a start without the API server would use older ones')
      })
  }

  /** Resolves once every write queued so far is done. */
  async settled(): Promise<void> {
    await this.#writing
  }

  /** The persisted classes, each validated again; an unreadable file is reported and treated as absent. */
  async read(): Promise<ClassState | undefined> {
    const log = this.options.logger
    let text: string
    try {
      text = await readFile(this.file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({err: errorMessage(error), file: this.file}, 'cannot read the persisted DeviceClasses')
      return undefined
    }
    try {
      const state = JSON.parse(text) as Partial<ClassState>
      if (state.version !== 1 || !Array.isArray(state.classes)) throw new Error('not a version 1 class state')
      if (state.node !== this.options.nodeName) throw new Error(`it was written for node ${state.node}, not ${this.options.nodeName}`)
      const classes: DeviceClass[] = []
      for (const item of state.classes) {
        const listed = listedClass(item)
        if (listed.ok) classes.push(listed.deviceClass)
        else log.warn({class: listed.name, file: this.file, problem: listed.message}, 'a persisted DeviceClass is invalid; skipped')
      }
      return {...(state as ClassState), classes, nodeLabels: {...state.nodeLabels}}
    } catch (error) {
      log.warn({err: errorMessage(error), file: this.file}, 'the persisted DeviceClasses cannot be used; ignored')
      return undefined
    }
  }
}
