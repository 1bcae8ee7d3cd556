import {setTimeout as sleep} from 'node:timers/promises'

/**
 * Re-checks `probe` until it returns a value other than undefined/false, or the deadline passes.
 * For conditions on external processes (readiness, a CRD becoming Established), never a fixed sleep.
 */
export async function waitFor<T>(what: string, probe: () => Promise<T | false | undefined>, options: {timeoutMs?: number; intervalMs?: number} = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000)
  let lastError: unknown
  for (;;) {
    try {
      const value = await probe()
      if (value !== undefined && value !== false) return value
    } catch (error) {
      lastError = error
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? `: ${lastError.message}` : ''
      throw new Error(`timed out after ${options.timeoutMs ?? 30_000}ms waiting for ${what}${detail}`)
    }
    await sleep(options.intervalMs ?? 100)
  }
}
