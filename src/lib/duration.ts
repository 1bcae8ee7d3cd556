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
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`
  const minutes = Math.floor(ms / 60_000)
  return `${minutes}m${Math.round((ms % 60_000) / 1000)}s`
}
