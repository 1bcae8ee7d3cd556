import {setTimeout as sleep} from 'node:timers/promises'

export interface WaitOptions {
  readonly timeoutMs?: number
  readonly intervalMs?: number
  /**
   * Settles with an Error once waiting is pointless (a child process exited): after one last probe, the
   * wait rejects with that error at once instead of running into its deadline.
   */
  readonly giveUpOn?: Promise<Error>
}

/**
 * Re-checks `probe` until it returns a value other than undefined/false, or the deadline passes.
 * For conditions on external processes (readiness, a CRD becoming Established), never a fixed sleep.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | false | undefined>, options: WaitOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000
  const deadline = Date.now() + timeoutMs
  let gaveUp: Error | undefined
  void options.giveUpOn?.then((error) => {
    gaveUp = error
  })
  let lastError: unknown
  for (;;) {
    const reason = gaveUp // read before the probe, so the last probe sees everything that came before it
    try {
      const value = await probe()
      if (value !== undefined && value !== false) return value
    } catch (error) {
      lastError = error
    }
    const detail = lastError instanceof Error ? `: ${lastError.message}` : ''
    if (reason) throw new Error(`gave up waiting for ${what}: ${reason.message}${detail}`, {cause: reason})
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${detail}`)
    await pause(options.intervalMs ?? 100, options.giveUpOn)
  }
}

/** Sleeps `ms`, or less when `giveUpOn` settles first (its timer is then cleared). */
async function pause(ms: number, giveUpOn: Promise<unknown> | undefined): Promise<void> {
  if (giveUpOn === undefined) return sleep(ms)
  const cut = new AbortController()
  await Promise.race([sleep(ms, undefined, {signal: cut.signal}).catch(() => {}), giveUpOn])
  cut.abort()
}
