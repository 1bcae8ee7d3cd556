import {readFileSync} from 'node:fs'
import path from 'node:path'

import {errorMessage} from '../errors.js'

/** One record of the udev database (`/run/udev/data/<id>`), reduced to what device matching uses. */
export interface UdevRecord {
  /** `E:` lines: udev properties, including the ones rules added (ID_VENDOR_ID, ID_SERIAL, …). */
  properties: Record<string, string>
  /** `S:` lines: device links relative to /dev, e.g. `serial/by-id/usb-…`. */
  links: string[]
  /** `G:` (tags) and `Q:` (current tags) lines, merged and without duplicates, in first-seen order. */
  tags: string[]
}

/** The database's file names for device nodes; anything else could be a path outside the directory. */
const deviceIdPattern = /^[bc]\d+:\d+$/

/** Parses the text of one udev database record. Other prefixes (L:, I:, V:, W:, …) carry nothing we match on. Pure. */
export function parseUdevDb(text: string): UdevRecord {
  const record: UdevRecord = {links: [], properties: {}, tags: []}
  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine
    if (line.length < 2 || line[1] !== ':') continue
    const value = line.slice(2)
    switch (line[0]) {
      case 'E': {
        const eq = value.indexOf('=')
        // Values may contain '=' themselves (filesystem labels, model strings), so split at the first one only.
        if (eq > 0) record.properties[value.slice(0, eq)] = value.slice(eq + 1)
        break
      }

      case 'S': {
        if (value.length > 0) record.links.push(value)
        break
      }

      case 'G':
      case 'Q': {
        // udev writes most tags twice (G: and Q:); callers want the set.
        if (value.length > 0 && !record.tags.includes(value)) record.tags.push(value)
        break
      }

      default: {
        break
      }
    }
  }

  return record
}

/**
 * The udev properties of device `id` (`c<major>:<minor>` or `b<major>:<minor>`), or undefined when udev has no
 * record: machines and containers without udevd have no `/run/udev` at all, which is normal, not an error.
 */
export async function readUdevProperties(udevDataDir: string, id: string): Promise<Record<string, string> | undefined> {
  if (!deviceIdPattern.test(id)) {
    throw new Error(`invalid udev database id "${id}": expected c<major>:<minor> or b<major>:<minor>`)
  }

  const file = path.join(udevDataDir, id)
  let text: string
  try {
    // Synchronously, as sysfs is read (sysfs-scanner.ts): the database is on tmpfs.
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw new Error(`cannot read udev database record ${file}: ${errorMessage(error)}`, {cause: error})
  }

  return parseUdevDb(text).properties
}
