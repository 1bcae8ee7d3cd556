/**
 * dpkg's version order (deb-version(7)): epoch numerically, then upstream version and Debian revision,
 * each compared as alternating non-digit parts (letters before non-letters, `~` before everything, even the
 * end) and digit parts (numerically). Picks the newest of a package's versions across suites.
 */
export function compareDebianVersions(a: string, b: string): number {
  const [epochA, upstreamA, revisionA] = split(a)
  const [epochB, upstreamB, revisionB] = split(b)
  return Math.sign(epochA - epochB) || compareParts(upstreamA, upstreamB) || compareParts(revisionA, revisionB)
}

function split(version: string): [number, string, string] {
  const colon = version.indexOf(':')
  const epoch = colon >= 0 ? Number(version.slice(0, colon)) : 0
  const rest = colon >= 0 ? version.slice(colon + 1) : version
  const dash = rest.lastIndexOf('-')
  return dash >= 0 ? [epoch, rest.slice(0, dash), rest.slice(dash + 1)] : [epoch, rest, '']
}

function compareParts(a: string, b: string): number {
  let i = 0
  let j = 0
  while (i < a.length || j < b.length) {
    let firstDiff = 0
    while ((i < a.length && !isDigit(a[i]!)) || (j < b.length && !isDigit(b[j]!))) {
      const ac = i < a.length && !isDigit(a[i]!) ? order(a[i]!) : 0
      const bc = j < b.length && !isDigit(b[j]!) ? order(b[j]!) : 0
      if (ac !== bc) return Math.sign(ac - bc)
      i++
      j++
    }
    while (a[i] === '0') i++
    while (b[j] === '0') j++
    while (i < a.length && isDigit(a[i]!) && j < b.length && isDigit(b[j]!)) {
      if (firstDiff === 0) firstDiff = a.charCodeAt(i) - b.charCodeAt(j)
      i++
      j++
    }
    if (i < a.length && isDigit(a[i]!)) return 1
    if (j < b.length && isDigit(b[j]!)) return -1
    if (firstDiff !== 0) return Math.sign(firstDiff)
  }
  return 0
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9'
}

function order(c: string): number {
  if (c === '~') return -1
  if (/[A-Za-z]/.test(c)) return c.charCodeAt(0)
  return c.charCodeAt(0) + 256
}
