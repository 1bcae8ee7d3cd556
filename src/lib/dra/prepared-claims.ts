import {mkdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {writeFileAtomic} from '../sys/atomic-write.js'

/** One device of a prepared claim: which request got it, through which class, and the CDI device that gives it. */
export interface PreparedDevice {
  /** The allocation result's request name (`req` or `req/subrequest`). */
  readonly request: string
  /** The DRA device name (a DNS label of the stable ID). */
  readonly device: string
  /** The device's stable ID: the agent gives the device back under any kernel name that has it. */
  readonly stableId: string
  /** The devices.nfdctl.io DeviceClass the request named. */
  readonly className: string
  /** Subset of r, w, m: the class's permissions. */
  readonly access: string
  /** Fully qualified CDI device ID, as kubelet passes it to the runtime. */
  readonly cdiId: string
  /** Whether the request asked for admin access. */
  readonly adminAccess?: boolean
  /**
   * Its request tolerates the unplugged taint: the claim is prepared and its containers start while the
   * device is unplugged (without it), and get it when it is back.
   */
  readonly toleratesUnplugged?: boolean
}

/** A ResourceClaim that kubelet had the driver prepare on this node. */
export interface PreparedClaim {
  readonly uid: string
  readonly namespace: string
  readonly name: string
  readonly devices: readonly PreparedDevice[]
  /** The UIDs of the pods the claim was reserved for when last prepared; kept in the record for the decoders of earlier builds, which refuse a claim without it (every pod sharing the claim gets its devices). */
  readonly pods: readonly string[]
}

const version = 1

/** Pure: the record as its file holds it. */
export function encodeClaims(claims: Iterable<PreparedClaim>): string {
  const sorted = [...claims].sort((a, b) => a.uid.localeCompare(b.uid))
  return `${JSON.stringify({claims: sorted, version})}\n`
}

/** Pure: the claims of a record file; a file of another version or shape is refused whole (nothing half-read). */
export function decodeClaims(text: string): PreparedClaim[] {
  const data = JSON.parse(text) as {version?: unknown; claims?: unknown} | null
  if (data?.version !== version || !Array.isArray(data.claims)) throw new Error(`not a version ${version} record of prepared claims`)
  for (const claim of data.claims as PreparedClaim[]) {
    const ok = typeof claim?.uid === 'string' && typeof claim.namespace === 'string' && typeof claim.name === 'string' && Array.isArray(claim.devices) && Array.isArray(claim.pods)
    const fields = ['device', 'stableId', 'className', 'cdiId', 'request', 'access'] as const
    if (!ok || !claim.devices.every((d) => fields.every((f) => typeof d?.[f] === 'string'))) {
      throw new Error('a prepared claim in the record lacks its uid, name, devices or pods')
    }
  }
  return data.claims as PreparedClaim[]
}

/**
 * The claims prepared on this node, kept under --state-dir (written atomically before kubelet gets an
 * answer), so that an agent that restarts answers kubelet's repeated calls the same way and keeps giving
 * the claims' containers their devices.
 */
export class PreparedClaims {
  readonly #claims = new Map<string, PreparedClaim>()
  readonly #file: string
  #writes: Promise<void> = Promise.resolve()

  constructor(readonly stateDir: string) {
    this.#file = join(stateDir, 'dra-claims.json')
  }

  get file(): string {
    return this.#file
  }

  /** Reads the record; a missing file is an empty record, a damaged one is an error (the caller says so and starts empty). */
  async load(): Promise<void> {
    let text: string
    try {
      text = await readFile(this.#file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
      throw error
    }
    this.#claims.clear()
    for (const claim of decodeClaims(text)) this.#claims.set(claim.uid, claim)
  }

  get(uid: string): PreparedClaim | undefined {
    return this.#claims.get(uid)
  }

  all(): PreparedClaim[] {
    return [...this.#claims.values()]
  }

  /** Records a claim: on disk first, then here (a failed write leaves both as they were). */
  async set(claim: PreparedClaim): Promise<void> {
    await this.#save((claims) => claims.set(claim.uid, claim))
  }

  /** Forgets a claim: on disk first, then here. */
  async delete(uid: string): Promise<void> {
    if (!this.#claims.has(uid)) return
    await this.#save((claims) => claims.delete(uid))
  }

  // One write at a time, each of the record as it is then with the change made; kept once it is on disk.
  #save(change: (claims: Map<string, PreparedClaim>) => void): Promise<void> {
    const write = this.#writes.then(async () => {
      const next = new Map(this.#claims)
      change(next)
      await mkdir(this.stateDir, {recursive: true})
      await writeFileAtomic(this.#file, encodeClaims(next.values()), {mode: 0o600})
      this.#claims.clear()
      for (const [uid, claim] of next) this.#claims.set(uid, claim)
    })
    this.#writes = write.catch(() => {})
    return write
  }
}
