import type {SweepEvent} from '../lib/gc/sweep.js'
import type {Progress} from './progress.js'

/** Turns sweep events into progress: live counts in the spinner, one line per finished step. */
export function sweepProgress(progress: Progress): (event: SweepEvent) => void {
  let lastTenth = -1
  return (event) => {
    switch (event.type) {
      case 'listing': {
        if (event.restarted) progress.warn(`${event.what} list restarted: the continue token expired (410)`)
        progress.update(`listing ${event.what} objects: ${event.total}`)
        break
      }
      case 'listed': {
        progress.step(`listed ${event.total} ${event.what} objects`)
        break
      }
      case 'kind-skipped': {
        progress.warn(`${event.kind}: ${event.reason}`)
        break
      }
      case 'list-failed': {
        break
      }
      case 'planned': {
        if (event.refused === undefined) progress.step(`found ${event.stale} stale objects`)
        break
      }
      case 'deleting': {
        // Made only when shown: a mass cleanup sends one event per object, and off a TTY most are not.
        const text = (): string => `deleting stale objects: ${event.done}/${event.total}${event.failed ? ` (${event.failed} failed)` : ''}`
        if (event.done === event.total) {
          progress.step(`deleted ${event.done - event.failed} of ${event.total} stale objects${event.failed ? `, ${event.failed} failed` : ''}`)
          break
        }
        // A log line per tenth, so a cron log shows movement without a line per object.
        const tenth = Math.floor((10 * event.done) / event.total)
        if (tenth !== lastTenth && event.total >= 100) {
          lastTenth = tenth
          progress.tick(text())
        } else if (progress.live) {
          progress.update(text())
        }
        break
      }
    }
  }
}
