/** setTimeout's limit (2^31 - 1 ms, about 24.8 days); a longer delay fires after 1 ms. */
export const maxDurationMs = 2_147_483_647

const unitMs: Record<string, number> = {h: 3_600_000, m: 60_000, ms: 1, s: 1000}

/**
 * Parses a Go-style duration ("1h30m", "45s", "250ms", "0") into milliseconds; undefined when malformed.
 * A bare number means seconds, as kubectl's --request-timeout does.
 */
export function parseDurationMs(text: string): number | undefined {
  const s = text.trim()
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s) * 1000)
  if (!/^(\d+(\.\d+)?(ms|h|m|s))+$/.test(s)) return undefined
  let total = 0
  for (const [, amount, unit] of s.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) total += Number(amount) * unitMs[unit]
  return Math.round(total)
}

export function formatDurationMs(ms: number): string {
  // Round first at each unit's precision, so 59.99s prints as 1m0s rather than 60.0s.
  if (Math.round(ms) < 1000) return `${Math.round(ms)}ms`
  if (ms < 9995) return `${(ms / 1000).toFixed(2)}s`
  if (ms < 59_950) return `${(ms / 1000).toFixed(1)}s`
  const seconds = Math.round(ms / 1000)
  return `${Math.floor(seconds / 60)}m${seconds % 60}s`
}
