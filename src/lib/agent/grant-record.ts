import {closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readSync, rmSync, writeSync} from 'node:fs'
import {dirname, join} from 'node:path'

import {decodeOwnedDevice, deviceOfNumber} from '../devices/owned-devices.js'
import type {Device} from '../devices/types.js'
import {writeFileAtomicSync} from '../sys/atomic-write.js'
import {readStateFile} from '../sys/coalesced-file.js'
import {ruleDeviceId} from '../runtime/device-program.js'
import type {AccessChange, DeviceAccess} from './container-access.js'

/** One device the agent granted a container: the rule it added and where it made the device node. */
export interface RecordedGrant {
  readonly type: 'b' | 'c'
  readonly major: number
  readonly minor: number
  /** Subset of r, w, m, in that order. */
  readonly access: string
  /** The node's path inside the container, e.g. /dev/loop3. */
  readonly devNode: string
}

/** What the agent granted, by containerd container id. */
export type GrantRecords = ReadonlyMap<string, readonly RecordedGrant[]>

const grantOf = (a: DeviceAccess): RecordedGrant => ({
  access: a.access,
  devNode: a.device.devNode,
  major: a.device.major,
  minor: a.device.minor,
  type: a.device.type === 'block' ? 'b' : 'c',
})

/** A device known only from the record (unplugged while the agent was away). */
export const deviceOfGrant = (g: RecordedGrant): Device => deviceOfNumber(g)

/**
 * Pure: the record to write before a change is applied, so that an agent that stops in the middle still
 * knows every rule it may have added: the grants recorded, with the change's grants in place of the same
 * devices or beside them.
 */
export function grantsBefore(recorded: readonly RecordedGrant[], change: AccessChange): RecordedGrant[] {
  const granted = change.grant.map(grantOf)
  const ids = new Set(granted.map(ruleDeviceId))
  return [...recorded.filter((g) => !ids.has(ruleDeviceId(g))), ...granted]
}

/**
 * Pure: the record once a change was applied in full: of the grants recorded, those the container still
 * holds (`held`: the devices its cgroup still allows, read before the change) and did not lose in the
 * change, and the change's grants. A recorded grant whose rule is gone (taken back) is forgotten.
 */
export function grantsAfter(recorded: readonly RecordedGrant[], held: ReadonlyMap<string, unknown>, change: AccessChange): RecordedGrant[] {
  const granted = change.grant.map(grantOf)
  const gone = new Set([...change.revoke.map((a) => a.device.id), ...granted.map(ruleDeviceId)])
  return [...recorded.filter((g) => held.has(ruleDeviceId(g)) && !gone.has(ruleDeviceId(g))), ...granted]
}

const version = 1

/** The record as its file holds it: one line, the containers in id order. */
export function encodeGrants(records: GrantRecords): string {
  const containers: Record<string, RecordedGrant[]> = {}
  for (const id of [...records.keys()].sort()) {
    const grants = records.get(id)!
    if (grants.length > 0) containers[id] = grants.map((g) => ({access: g.access, devNode: g.devNode, major: g.major, minor: g.minor, type: g.type}))
  }
  return `${JSON.stringify({containers, version})}\n`
}

/** Pure: the record from its file's text; throws one line naming what is wrong. */
export function decodeGrants(text: string): Map<string, RecordedGrant[]> {
  let state: unknown
  try {
    state = JSON.parse(text)
  } catch (error) {
    throw new Error(`not JSON (${(error as Error).message})`)
  }
  const {containers, version: got} = (state ?? {}) as {containers?: unknown; version?: unknown}
  if (got !== version) throw new Error(`version must be ${version}, got ${JSON.stringify(got)}`)
  if (typeof containers !== 'object' || containers === null || Array.isArray(containers)) throw new Error('containers must be an object of container ids')
  const records = new Map<string, RecordedGrant[]>()
  for (const [id, grants] of Object.entries(containers)) {
    if (!containerIdPattern.test(id)) throw new Error(`containers: ${JSON.stringify(id)} is not a container id`)
    if (!Array.isArray(grants)) throw new Error(`containers["${id}"] must be a list of grants`)
    records.set(
      id,
      grants.map((g: unknown, i) => decodeGrant(g, `containers["${id}"][${i}]`)),
    )
  }
  return records
}

/** One line of the journal: a container's grants, set before a grant is made. */
export function encodeJournalLine(containerId: string, grants: readonly RecordedGrant[]): string {
  return `${JSON.stringify({container: containerId, grants: grants.map((g) => ({access: g.access, devNode: g.devNode, major: g.major, minor: g.minor, type: g.type}))})}\n`
}

/**
 * Pure: the journal's lines in order, each a container and its grants then. A line torn in its write (the
 * agent stopped, or the disk was full) is left out: its grant was never made, as setNow had not returned.
 * GrantRecord undoes a torn write or starts the next line after it; a whole line found glued onto a torn
 * one all the same is read. Throws one line naming what is wrong with any other.
 */
export function decodeJournal(text: string): Array<[string, RecordedGrant[]]> {
  const lines = text.split('\n')
  const entries: Array<[string, RecordedGrant[]]> = []
  for (const [i, line] of lines.entries()) {
    if (line === '') continue
    let entry: unknown
    try {
      entry = parseJournalLine(line)
    } catch (error) {
      throw new Error(`line ${i + 1}: ${(error as Error).message}`)
    }
    if (entry === undefined) continue
    const {container, grants} = (entry ?? {}) as {container?: unknown; grants?: unknown}
    if (typeof container !== 'string' || !containerIdPattern.test(container)) throw new Error(`line ${i + 1}: ${JSON.stringify(container)} is not a container id`)
    if (!Array.isArray(grants)) throw new Error(`line ${i + 1}: grants must be a list`)
    entries.push([container, grants.map((g: unknown, j) => decodeGrant(g, `line ${i + 1}: grants[${j}]`))])
  }
  return entries
}

/** What every line encodeJournalLine writes starts with. No string in a line holds it: JSON escapes quotes. */
const lineStart = '{"container":'

/**
 * A journal line's JSON, or undefined for a torn line (it starts as every line does and does not parse);
 * after a torn start, the whole line glued onto it. Throws for a line no write of the journal makes.
 */
function parseJournalLine(line: string): unknown {
  try {
    return JSON.parse(line)
  } catch (error) {
    const glued = line.lastIndexOf(lineStart)
    const torn = glued > 0 ? line.slice(0, glued) : line
    if (!torn.startsWith(lineStart) && !lineStart.startsWith(torn)) throw new Error(`not JSON (${(error as Error).message})`)
    if (glued <= 0) return undefined
    try {
      return JSON.parse(line.slice(glued))
    } catch {
      return undefined // torn too
    }
  }
}

const containerIdPattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/

function decodeGrant(raw: unknown, at: string): RecordedGrant {
  const device = decodeOwnedDevice(raw, at)
  const {access} = (raw ?? {}) as Record<string, unknown>
  if (typeof access !== 'string' || !/^r?w?m?$/.test(access) || access === '') throw new Error(`${at}.access must be r, w, m or several in that order, got ${JSON.stringify(access)}`)
  return {...device, access}
}

/** The journal, open for appending: how long it is when no write is torn, and whether the file ends in a torn line. */
interface OpenJournal {
  readonly fd: number
  length: number
  torn: boolean
}

/**
 * What the agent granted each container, kept under --state-dir, so that an agent that restarts still takes
 * back a grant whose device went while it was away: `grants.json` (written atomically) and beside it
 * `grants.journal`, whose lines are read over it. Changes are made in memory at once. The one before a grant
 * (setNow) is on disk when the call returns (or it throws: a line the disk has no room for is taken back
 * off the journal, which holds whole lines only): one line appended to the journal with one write(2), as it sits
 * on the hot-plug's path, where replacing the file costs about a millisecond (more while the disk is busy:
 * ext4 starts writing a file renamed over another at once). Every other change (a grant made, containers
 * gone) is written soon after, off that path, once for all the changes of a turn of the event loop: the
 * whole record in `grants.json`, and the journal emptied. Read over an older `grants.json` (the agent
 * stopped between the two), the journal's lines still say at least what the containers hold: each names
 * every grant its container had, and grants are only added through it.
 */
export class GrantRecord {
  #records = new Map<string, readonly RecordedGrant[]>()
  /** A change not in `grants.json` yet (or a write that failed). */
  #dirty = false
  #soon: Promise<void> | undefined
  #journal: OpenJournal | undefined

  readonly file: string
  readonly journalFile: string

  constructor(options: {readonly stateDir: string}) {
    this.file = join(options.stateDir, 'grants.json')
    this.journalFile = join(options.stateDir, 'grants.journal')
  }

  /**
   * Reads the file and the journal over it; a missing one is an empty record. A file that cannot be read or
   * decoded is left out (its problem returned, to be reported) and replaced by the next write.
   */
  async load(): Promise<string | undefined> {
    const {problem, value} = await readStateFile(this.file, decodeGrants)
    if (value !== undefined) this.#records = value
    const journal = await readStateFile(this.journalFile, decodeJournal)
    for (const [id, grants] of journal.value ?? []) this.#change(id, grants)
    if ((journal.value?.length ?? 0) > 0) this.#dirty = true
    return [problem, journal.problem].filter((p) => p !== undefined).join('; ') || undefined
  }

  grants(containerId: string): readonly RecordedGrant[] {
    return this.#records.get(containerId) ?? []
  }

  /**
   * Sets a container's grants and has them on disk before it returns (nothing to write when nothing
   * changed); throws when they cannot be written, and the record stays as it was.
   */
  setNow(containerId: string, grants: readonly RecordedGrant[]): void {
    const before = this.#records.get(containerId)
    if (!this.#change(containerId, grants)) return
    try {
      this.#append(encodeJournalLine(containerId, grants))
    } catch (error) {
      this.#change(containerId, before ?? [])
      throw error
    }
    this.#dirty = true
  }

  /** Sets a container's grants; resolves once they are on disk (at once when nothing changed). */
  set(containerId: string, grants: readonly RecordedGrant[]): Promise<void> {
    return this.#change(containerId, grants) || this.#dirty ? this.#writeSoon() : Promise.resolve()
  }

  /** Forgets the containers not in `ids` (they no longer exist). */
  retain(ids: ReadonlySet<string>): Promise<void> {
    const gone = [...this.#records.keys()].filter((id) => !ids.has(id))
    for (const id of gone) this.#records.delete(id)
    return gone.length > 0 || this.#dirty ? this.#writeSoon() : Promise.resolve()
  }

  /** True when the grants differ from the ones in memory. */
  #change(containerId: string, grants: readonly RecordedGrant[]): boolean {
    const before = this.#records.get(containerId) ?? []
    if (grants.length === 0) this.#records.delete(containerId)
    else this.#records.set(containerId, [...grants])
    return before.length !== grants.length || before.some((g, i) => JSON.stringify(g) !== JSON.stringify(grants[i]))
  }

  #append(line: string): void {
    this.#journal ??= this.#openJournal()
    const journal = this.#journal
    const bytes = Buffer.from(journal.torn ? `\n${line}` : line)
    let written: number
    try {
      written = writeSync(journal.fd, bytes)
    } catch (error) {
      this.#undo(journal)
      throw error
    }
    if (written !== bytes.length) {
      this.#undo(journal)
      throw new Error(`${this.journalFile}: a short write (the disk is full?)`)
    }
    journal.length += written
    journal.torn = false
  }

  /** Opens the journal for appending; after a line torn in its write (an agent stopped in it), the next one starts on its own. */
  #openJournal(): OpenJournal {
    mkdirSync(dirname(this.journalFile), {mode: 0o700, recursive: true})
    const fd = openSync(this.journalFile, 'a+', 0o600)
    try {
      const {size} = fstatSync(fd)
      const last = Buffer.alloc(1)
      return {fd, length: size, torn: size > 0 && readSync(fd, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a}
    } catch (error) {
      closeSync(fd)
      throw error
    }
  }

  /**
   * Takes a torn write (a full disk writes part of a line) back off the journal, so that the next line is not
   * glued onto it: that line's grant is made, and a line that does not parse is left out when read. Should
   * even that fail, the journal is closed (the caller throws the write's error): opened again, it starts
   * the next line after the torn one.
   */
  #undo(journal: OpenJournal): void {
    try {
      ftruncateSync(journal.fd, journal.length)
    } catch {
      this.close()
    }
  }

  #write(): void {
    this.#dirty = false
    try {
      mkdirSync(dirname(this.file), {mode: 0o700, recursive: true})
      // Not flushed to disk: the grants die with the containers on a reboot, and the page cache outlives a
      // crashed agent. A flush would sit on every hot-plug's path (milliseconds, more while kubelet writes).
      writeFileAtomicSync(this.file, encodeGrants(this.#records), {durable: false, mode: 0o600})
      if (this.#journal === undefined) rmSync(this.journalFile, {force: true})
      else {
        ftruncateSync(this.#journal.fd, 0)
        this.#journal.length = 0
        this.#journal.torn = false
      }
    } catch (error) {
      this.#dirty = true
      throw error
    }
  }

  /** Closes the journal (a later setNow opens it again). */
  close(): void {
    if (this.#journal !== undefined) closeSync(this.#journal.fd)
    this.#journal = undefined
  }

  /** Once no batch runs: the write that was soon made, and the journal closed. */
  async stop(): Promise<void> {
    await this.#soon?.catch(() => {})
    this.close()
  }

  /** Writes after this turn of the event loop, with every change made until then. */
  #writeSoon(): Promise<void> {
    this.#dirty = true
    this.#soon ??= new Promise((resolve, reject) => {
      setImmediate(() => {
        this.#soon = undefined
        try {
          if (this.#dirty) this.#write()
          resolve()
        } catch (error) {
          reject(error as Error)
        }
      })
    })
    return this.#soon
  }
}
