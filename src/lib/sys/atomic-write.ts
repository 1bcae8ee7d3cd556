import {randomBytes} from 'node:crypto'
import {closeSync, fchmodSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {open, rename, rm} from 'node:fs/promises'
import {dirname} from 'node:path'

/**
 * Replaces `file` with `data` all at once: a temporary file in the same directory (so rename is atomic),
 * flushed to disk before the rename and the directory after it, so that a crash or power loss leaves the
 * old content or the new one, never half of either. The temporary name ends in `.tmp`, which the readers
 * of directories of *.json or *.yaml files (CDI registries) skip. With `owner`, the new file gets that uid and
 * gid before it takes the old one's place. `durable: false` leaves out the two flushes, for a file that needs to
 * outlive the process but not the machine: still all or nothing, as rename is, for every reader and for a
 * process that crashes.
 */
export interface AtomicWriteOptions {
  /** Default 0o644; the umask does not get a say. */
  readonly mode?: number
  readonly owner?: {readonly uid: number; readonly gid: number}
  /** Default true. */
  readonly durable?: boolean
}

export async function writeFileAtomic(file: string, data: string, {durable = true, mode = 0o644, owner}: AtomicWriteOptions = {}): Promise<void> {
  const temporary = `${file}.${randomBytes(4).toString('hex')}.tmp`
  try {
    const handle = await open(temporary, 'wx', mode)
    try {
      await handle.writeFile(data)
      if (owner) {
        const made = await handle.stat()
        // Before chmod: chown clears set-id bits.
        if (made.uid !== owner.uid || made.gid !== owner.gid) await handle.chown(owner.uid, owner.gid)
      }
      await handle.chmod(mode) // the umask does not get a say
      if (durable) await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temporary, file)
  } catch (error) {
    await rm(temporary, {force: true})
    throw error
  }
  if (!durable) return
  const directory = await open(dirname(file), 'r')
  try {
    await directory.sync()
  } finally {
    await directory.close()
  }
}

/**
 * writeFileAtomic in one synchronous call, for a small file written on a path that must not wait for the
 * thread pool (the grant record, before each grant); the same all-or-nothing, `owner` aside.
 */
export function writeFileAtomicSync(file: string, data: string, {durable = true, mode = 0o644}: Omit<AtomicWriteOptions, 'owner'> = {}): void {
  const temporary = `${file}.${randomBytes(4).toString('hex')}.tmp`
  try {
    const fd = openSync(temporary, 'wx', mode)
    try {
      writeFileSync(fd, data)
      fchmodSync(fd, mode) // the umask does not get a say
      if (durable) fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, file)
  } catch (error) {
    rmSync(temporary, {force: true})
    throw error
  }
  if (!durable) return
  const directory = openSync(dirname(file), 'r')
  try {
    fsyncSync(directory)
  } finally {
    closeSync(directory)
  }
}
