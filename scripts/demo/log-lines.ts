// Reading the demo's timings from the logs themselves: the pod's (kubectl logs --timestamps) and the agent's.

/** A line of `kubectl logs --timestamps`: the time the runtime took it from the container, then the text. */
export interface TimedLine {
  readonly at: Date
  readonly text: string
}

/** Parses `kubectl logs --timestamps` output (`2026-12-05T22:48:01.433219875Z text`); lines without a time are left out. */
export function timedLines(output: string): TimedLine[] {
  return output.split('\n').flatMap((line) => {
    const space = line.indexOf(' ')
    if (space < 0) return []
    const at = new Date(line.slice(0, space))
    return Number.isNaN(at.getTime()) ? [] : [{at, text: line.slice(space + 1)}]
  })
}

/** The agent's `devices updated` log lines (JSON) that granted `devNode`, in order. */
export function grantsOf(agentLog: string, devNode: string): Array<{readonly at: Date; readonly line: string}> {
  return agentLog.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return []
    try {
      const record = JSON.parse(line) as {msg?: string; time?: number; granted?: string[]}
      const granted = record.msg === 'devices updated' && record.granted?.some((g) => g.split(' ')[0] === devNode)
      return granted && typeof record.time === 'number' ? [{at: new Date(record.time), line}] : []
    } catch {
      return []
    }
  })
}

/** Seconds from `from` to `to`, as the demo prints them. */
export const secondsBetween = (from: Date, to: Date): string => `${((to.getTime() - from.getTime()) / 1000).toFixed(2)} s`
